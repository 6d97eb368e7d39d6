"""Kafka error codes the gateway uses, and responses it builds itself.

``error_response`` builds a response of any kio schema with every required
field at its neutral value and every ``error_code`` set, so the gateway can
answer a request it refuses in the client's own version.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

UNSUPPORTED_VERSION = ErrorCode.unsupported_version  # 35
INVALID_REQUEST = ErrorCode.invalid_request  # 42

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "uuid": uuid.UUID(int=0),
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    "float64": 0.0,
    "string": "",
}


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _neutral(cls: type[Any], field: dataclasses.Field[Any], code: ErrorCode) -> Any:
    kafka_type = field.metadata.get("kafka_type")
    hint = _hints(cls)[field.name]
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if kafka_type == "error_code":
        return code
    if kafka_type == "records":  # Kafka sends empty records, never null (librdkafka insists)
        return b""
    if origin is tuple:
        return ()
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return None
    if kafka_type in _ZERO_BY_KAFKA_TYPE:
        return _ZERO_BY_KAFKA_TYPE[kafka_type]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build_entity(hint, code)
    if isinstance(hint, type) and issubclass(hint, int):
        return hint(0)
    raise TypeError(f"no neutral value for {cls.__name__}.{field.name} ({hint!r})")


def build_entity(cls: type[Any], code: ErrorCode) -> Any:
    """An instance of ``cls`` with neutral values and every error code set to ``code``."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get("kafka_type") == "error_code":
            values[field.name] = code
        elif (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        ):
            continue
        else:
            values[field.name] = _neutral(cls, field, code)
    return cls(**values)


def error_response(response_cls: type[Entity], code: ErrorCode) -> Entity:
    """A whole response of ``response_cls`` that reports ``code`` at the top level only.

    To refuse a request, use ``protocol.refusal.refuse``: it also puts ``code`` on every
    entry the request named, where schemas such as Produce keep their errors."""
    entity: Entity = build_entity(response_cls, code)
    return entity
