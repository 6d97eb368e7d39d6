"""Record counts and error codes read from raw frames, without decoding them.

A Produce request or Fetch response is mostly record batches. Decoding it with
kio copies every batch into a ``bytes`` object (about 2 ms per MiB), only for
the access log to want two numbers: how many records, and the first error code.
``scan`` walks the frame instead, guided by the kio schema class of the message
(so no message layout is written by hand here): fixed-size fields are skipped,
arrays and strings are stepped over by their lengths, and each ``records`` field
is walked batch by batch, reading the record count at its fixed offset in the
v2 batch header (compressed batches too: the count is outside the compressed
part). A legacy (magic 0/1) message counts as one record, a compressed legacy
wrapper too. A trailing partial batch, which a broker may send in a Fetch
response, is not counted: the client discards it as well.

Everything here is pure and raises ``ProtocolError`` on a malformed frame.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from typing import Any

from ..protocol.codec import ProtocolError

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}

# Plan steps: (op, argument).
_SKIP, _STRING, _BYTES, _RECORDS, _ERROR, _ARRAY, _STRUCT, _OPT_STRUCT, _PRIMS = range(9)
Step = tuple[int, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How to step over one kio entity's encoding."""

    steps: tuple[Step, ...]
    flexible: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    """What ``scan`` found: records in every ``records`` field (0 when not counted), the
    first non-zero error code, and how many tagged fields the message itself carries
    (its top level: where Fetch v16+ puts the leader hints ``node_endpoints``)."""

    records: int
    error_code: int
    tagged: int = 0


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner[0], True
    return hint, False


def _primitive_step(kafka_type: str) -> Step:
    if kafka_type in _FIXED:
        return (_SKIP, _FIXED[kafka_type])
    if kafka_type == "error_code":
        return (_ERROR, None)
    if kafka_type == "string":
        return (_STRING, None)
    if kafka_type == "bytes":
        return (_BYTES, None)
    if kafka_type == "records":
        return (_RECORDS, None)
    raise ValueError(f"unknown kafka_type {kafka_type!r}")


_PLANS: dict[Any, Plan] = {}


def plan_for(cls: Any) -> Plan:
    """The step plan of a kio entity class (cached; tagged fields are skipped as a block)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _build_plan(cls)
    return plan


def _build_plan(cls: Any) -> Plan:
    steps: list[Step] = []
    for field in dataclasses.fields(cls):
        if "tag" in field.metadata:
            continue  # lives in the tagged-fields section
        hint, optional = _unwrap_optional(field.type)
        if typing.get_origin(hint) is tuple:
            (element, _ellipsis) = typing.get_args(hint)
            element, _ = _unwrap_optional(element)
            if dataclasses.is_dataclass(element):
                steps.append((_ARRAY, plan_for(element)))
            else:
                steps.append((_PRIMS, _primitive_step(field.metadata["kafka_type"])))
        elif dataclasses.is_dataclass(hint):
            steps.append((_OPT_STRUCT if optional else _STRUCT, plan_for(hint)))
        else:
            steps.append(_primitive_step(field.metadata["kafka_type"]))
    return Plan(tuple(steps), bool(getattr(cls, "__flexible__", False)))


def batch_record_count(data: bytes | memoryview, start: int = 0, end: int | None = None) -> int:
    """Records in the complete batches of a records field ``data[start:end]``."""
    end = len(data) if end is None else end
    count = 0
    pos = start
    while end - pos >= 17:  # base offset, length, epoch/crc…, magic
        (length,) = _INT32.unpack_from(data, pos + 8)
        total = 12 + length
        if length < 14 or pos + total > end:
            break  # partial (or nonsense) trailing batch
        if data[pos + 16] >= 2:
            if length < 49:
                raise ProtocolError(f"record batch of {length} bytes is shorter than its header")
            count += max(_INT32.unpack_from(data, pos + 57)[0], 0)
        else:
            count += 1  # one legacy message (or one compressed wrapper)
        pos += total
    return count


class _Walker:
    __slots__ = ("count", "data", "end", "error", "pos", "records", "tagged", "top_error")

    def __init__(self, data: bytes | memoryview, pos: int, count: bool) -> None:
        self.data = data
        self.end = len(data)
        self.pos = pos
        self.count = count
        self.records = 0
        self.error = 0
        self.top_error = 0
        self.tagged = 0

    def _uvarint(self) -> int:
        data, pos = self.data, self.pos
        value = shift = 0
        while True:
            if pos >= self.end:
                raise ProtocolError("varint runs past the end of the frame")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 28:
                raise ProtocolError("varint is too long")
        self.pos = pos
        return value

    def _int(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > self.end:
            raise ProtocolError("frame ends inside a field")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def _length(self, flexible: bool, legacy: struct.Struct) -> int:
        """A string/bytes/array length; -1 for null."""
        return self._uvarint() - 1 if flexible else self._int(legacy)

    def _advance(self, size: int) -> int:
        start = self.pos
        if size < 0 or start + size > self.end:
            raise ProtocolError("a field runs past the end of the frame")
        self.pos = start + size
        return start

    def _primitive(self, op: int, arg: Any, flexible: bool, top: bool = False) -> None:
        if op == _SKIP:
            self._advance(arg)
        elif op == _ERROR:
            code = self._int(_INT16)
            if code and not self.error:
                self.error = code
            if code and top and not self.top_error:
                self.top_error = code
        elif op == _STRING:
            self._advance(max(self._length(flexible, _INT16), 0))
        elif op == _BYTES:
            self._advance(max(self._length(flexible, _INT32), 0))
        else:  # _RECORDS
            size = max(self._length(flexible, _INT32), 0)
            start = self._advance(size)
            if self.count:
                self.records += batch_record_count(self.data, start, start + size)

    def _tagged_fields(self) -> int:
        fields = self._uvarint()
        for _ in range(fields):
            self._uvarint()
            self._advance(self._uvarint())
        return fields

    def walk(self, plan: Plan, top: bool = False) -> None:
        flexible = plan.flexible
        for op, arg in plan.steps:
            if op == _ARRAY:
                for _ in range(self._length(flexible, _INT32)):
                    self.walk(arg)
            elif op == _STRUCT:
                self.walk(arg)
            elif op == _OPT_STRUCT:
                if self._int(_INT8) >= 0:
                    self.walk(arg)
            elif op == _PRIMS:
                inner_op, inner_arg = arg
                for _ in range(self._length(flexible, _INT32)):
                    self._primitive(inner_op, inner_arg, flexible)
            else:
                self._primitive(op, arg, flexible, top)
        if flexible:
            fields = self._tagged_fields()
            if top:
                self.tagged = fields


def scan(
    data: bytes | memoryview, body_offset: int, schema: type[Any], count: bool = True
) -> Summary:
    """Walk a message body of kio class ``schema`` starting at ``body_offset``.

    ``data`` is the frame without its size prefix; ``body_offset`` comes from
    ``parse_request_head`` (requests) or ``response_body_offset`` (responses).
    ``count=False``: the batches are stepped over, not counted (``records`` is 0).
    """
    walker = _Walker(data, body_offset, count)
    try:
        walker.walk(plan_for(schema), top=True)
    except (struct.error, IndexError) as exc:
        raise ProtocolError(f"cannot scan {schema.__name__}: {exc}") from None
    return Summary(walker.records, walker.top_error or walker.error, walker.tagged)


# -- decoded entities (when a stage decoded the message anyway) -------------------


def produce_records(request: Any) -> int:
    """Records in a decoded Produce request: what ``scan`` counts in its frame, read
    from the batches kio already cut out (no walk over the schema)."""
    total = 0
    for topic in request.topic_data:
        for partition in topic.partition_data:
            if partition.records is not None:
                total += batch_record_count(partition.records)
    return total


def produce_error_code(response: Any) -> int:
    """A decoded Produce response's error code as ``scan`` reads it from the frame: it
    has no top-level one, so the first non-zero partition error code; 0."""
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                return int(partition.error_code)
    return 0


def records_in(entity: Any) -> int:
    """Records in every ``records`` field of a decoded Produce request or Fetch response."""
    total = 0
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.metadata.get("kafka_type") == "records":
            if value is not None:
                total += batch_record_count(value)
        elif isinstance(value, tuple):
            total += sum(records_in(item) for item in value if dataclasses.is_dataclass(item))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            total += records_in(value)
    return total


def first_error_code(entity: Any) -> int:
    """The top-level error code of a decoded response, else its first non-zero part's; 0."""
    nested: list[Any] = []
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.metadata.get("kafka_type") == "error_code":
            if int(value):
                return int(value)
        elif isinstance(value, tuple):
            nested.extend(item for item in value if dataclasses.is_dataclass(item))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            nested.append(value)
    for item in nested:
        code = first_error_code(item)
        if code:
            return code
    return 0
