"""Sample requests for any kio request schema, naming one resource everywhere."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

_STRING_NAMES = {
    "name", "topic", "topic_name", "group_id", "transactional_id", "key", "resource_name",
    "v3_and_below_transactional_id", "member_id", "group_instance_id", "instance_id",
}  # fmt: skip


def _sample(hint: Any, field_name: str, resource: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _sample(inner[0], field_name, resource)
    if origin is tuple:
        return (_sample(args[0], field_name, resource),)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return sample_request(hint, resource)
    if hint is str or (isinstance(hint, type) and issubclass(hint, str)):
        return resource if field_name in _STRING_NAMES or field_name.endswith("s") else "x"
    if isinstance(hint, type) and issubclass(hint, float):
        return hint(1.0)
    if hint is bool:
        return False
    if hint is bytes:
        return b""
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return datetime.timedelta(seconds=1)
    if hint is uuid.UUID:
        return uuid.UUID(int=7)
    if isinstance(hint, type) and issubclass(hint, int):
        if field_name in ("replica_id",):
            return hint(-1)
        if field_name == "resource_type":
            return hint(2)
        if field_name in ("acks",):
            return hint(-1)
        return hint(0)
    raise TypeError(f"no sample for {field_name}: {hint!r}")


def sample_request(cls: type[Any], resource: str) -> Any:
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get("kafka_type") == "records":
            values[field.name] = b""
            continue
        values[field.name] = _sample(hints[field.name], field.name, resource)
    return cls(**values)
