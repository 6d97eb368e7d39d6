"""Request/response headers and bodies, decoded only on demand.

The hot path reads the fixed 8-byte request prefix (``peek_request``) and, for
Produce, the ``acks`` field; full bodies are decoded with kio only when a
stage asks for them.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.serial.readers import read_unsigned_varint
from kio.static.protocol import Entity

from .apis import (
    PRODUCE,
    request_header_version,
    request_schema,
    response_header_version,
    response_schema,
)
from .framing import frame

_PREFIX = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

E = TypeVar("E", bound=Entity)
Data = bytes | memoryview
"""A frame's payload: the broker's bytes or a view into them."""


class ProtocolError(Exception):
    """A frame that cannot be decoded as the message it claims to be (remote's fault)."""


@dataclass(frozen=True, slots=True)
class RequestHead:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def peek_request(data: Data) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` from the fixed header prefix."""
    if len(data) < 8:
        raise ProtocolError(f"request of {len(data)} bytes is shorter than a header")
    key, version, correlation_id = _PREFIX.unpack_from(data, 0)
    return key, version, correlation_id


def _skip_tagged_fields(data: Data, offset: int) -> int:
    count, size = read_unsigned_varint(data, offset)
    offset += size
    for _ in range(count):
        _tag, size = read_unsigned_varint(data, offset)
        offset += size
        length, size = read_unsigned_varint(data, offset)
        offset += size + length
    if offset > len(data):
        raise ProtocolError("tagged fields run past the end of the frame")
    return offset


def parse_request_head(data: Data, prefix: tuple[int, int, int] | None = None) -> RequestHead:
    """The whole request header; the API version must be one kio knows. ``prefix``:
    what ``peek_request`` read from ``data`` already (the caller peeked first)."""
    key, version, correlation_id = peek_request(data) if prefix is None else prefix
    if len(data) < 10:
        raise ProtocolError("request header is truncated before client_id")
    (length,) = _INT16.unpack_from(data, 8)
    offset = 10
    client_id: str | None = None
    if length >= 0:
        if offset + length > len(data):
            raise ProtocolError("client_id runs past the end of the frame")
        client_id = str(data[offset : offset + length], "utf-8", "replace")
        offset += length
    elif length != -1:
        raise ProtocolError(f"invalid client_id length {length}")
    try:
        if request_header_version(key, version) >= 2:
            offset = _skip_tagged_fields(data, offset)
    except DecodeError as exc:
        raise ProtocolError(f"bad request header tagged fields: {exc}") from None
    return RequestHead(key, version, correlation_id, client_id, offset)


def _read_exact(cls: type[E], data: Data, offset: int, version: int, strict: bool = True) -> E:
    """``cls`` at ``offset``; errors name it and ``version`` (named on failure only: this
    runs for every request and response decoded)."""
    try:
        entity, size = entity_reader(cls)(data, offset)
    except (DecodeError, ValueError, UnicodeDecodeError, KeyError) as exc:
        # KeyError: kio knows no such tagged field (Kafka would skip it; kio cannot)
        what = f"{cls.__name__} v{version}"
        raise ProtocolError(f"cannot decode {what}: {type(exc).__name__}: {exc}") from None
    if strict and offset + size != len(data):
        what = f"{cls.__name__} v{version}"
        raise ProtocolError(f"{what} has {len(data) - offset - size} trailing bytes")
    return entity


def decode_request(head: RequestHead, data: Data) -> Entity:
    """Decode a request body. Trailing bytes are ignored, as Kafka's own parser does:
    librdkafka 2.x sends three extra bytes after an all-topics MetadataRequest v13."""
    cls = request_schema(head.api_key, head.api_version)
    return _read_exact(cls, data, head.body_offset, head.api_version, strict=False)


def response_body_offset(data: Data, api_key: int, api_version: int) -> int:
    """Where the body starts in a response frame (after the correlation id and tags)."""
    if len(data) < 4:
        raise ProtocolError("response shorter than its correlation id")
    if response_header_version(api_key, api_version) == 0:
        return 4
    try:
        return _skip_tagged_fields(data, 4)
    except DecodeError as exc:
        raise ProtocolError(f"bad response header tagged fields: {exc}") from None


def response_correlation_id(data: Data) -> int:
    if len(data) < 4:
        raise ProtocolError("response shorter than its correlation id")
    value: int = _INT32.unpack_from(data, 0)[0]
    return value


def decode_response(data: Data, api_key: int, api_version: int, cls: type[E] | None = None) -> E:
    """Decode a response frame's body (``cls`` overrides the schema, e.g. ApiVersions v0)."""
    offset = response_body_offset(data, api_key, api_version)
    schema: type[Any] = cls if cls is not None else response_schema(api_key, api_version)
    entity: E = _read_exact(schema, data, offset, api_version)
    return entity


def encode_body(entity: Entity) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Entity) -> bytes:
    """A complete, size-prefixed response frame."""
    header = _INT32.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        header += b"\x00"  # no tagged fields
    return frame(header + encode_body(body))


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Entity
) -> bytes:
    """A complete, size-prefixed request frame (used by the gateway's own client and tests)."""
    if client_id is None:
        client = _INT16.pack(-1)
    else:
        raw = client_id.encode()
        client = _INT16.pack(len(raw)) + raw
    header = _PREFIX.pack(api_key, api_version, correlation_id) + client
    if request_header_version(api_key, api_version) >= 2:
        header += b"\x00"
    return frame(header + encode_body(body))


def produce_acks(data: Data, head_offset: int, api_version: int) -> int:
    """The ``acks`` of a Produce request, read without decoding the records.

    ``head_offset`` is where the body starts. Produce v3+ opens with the
    transactional id (compact string from v9, legacy string before), then acks.
    """
    offset = head_offset
    try:
        if request_header_version(PRODUCE, api_version) >= 2:
            length, size = read_unsigned_varint(data, offset)
            offset += size + max(length - 1, 0)
        else:
            (length,) = _INT16.unpack_from(data, offset)
            offset += 2 + max(length, 0)
        (acks,) = _INT16.unpack_from(data, offset)
    except (DecodeError, struct.error) as exc:
        raise ProtocolError(f"cannot read Produce acks: {exc}") from None
    return int(acks)


def frame_produce_acks(frame: bytes) -> int:
    """``produce_acks`` of a whole Produce frame (size prefix included)."""
    payload = memoryview(frame)[4:]
    head = parse_request_head(payload)
    return produce_acks(payload, head.body_offset, head.api_version)
