"""kio entities from plain data (scenario files), neutral values for what is left out."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.protocol.errors import build_entity


def _convert(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value)
    if origin is tuple:
        return tuple(_convert(args[0], item) for item in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_data(hint, value)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return datetime.timedelta(milliseconds=value)
    if hint is uuid.UUID:
        return uuid.UUID(value)
    if hint is ErrorCode:
        return ErrorCode(value)
    if isinstance(hint, type):
        return hint(value)
    return value


def from_data(cls: type[Any], data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    base = build_entity(cls, ErrorCode.none)
    values = {name: _convert(hints[name], value) for name, value in data.items()}
    return dataclasses.replace(base, **values)


def error_codes(entity: Any, path: str = "") -> dict[str, int]:
    """Every error code in a response, keyed by the names on its path."""
    found: dict[str, int] = {}
    if dataclasses.is_dataclass(entity):
        label = path
        for key in ("name", "topic", "group_id", "transactional_id", "key", "resource_name"):
            value = getattr(entity, key, None)
            if isinstance(value, str):
                label = f"{path}/{value}" if path else value
                break
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if field.name.endswith("error_code") and isinstance(value, int):
                found[f"{label}.{field.name}" if label else field.name] = int(value)
            elif isinstance(value, tuple):
                for item in value:
                    found.update(error_codes(item, label))
            elif dataclasses.is_dataclass(value):
                found.update(error_codes(value, label))
    return found
