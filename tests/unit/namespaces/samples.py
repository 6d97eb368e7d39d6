"""Messages of any kio schema with one value in every string field, and the paths of
the fields that look like names (for the completeness test)."""

from __future__ import annotations

import dataclasses
import datetime
import re
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

# what looks like a name of a resource in kio's field names
NAME_LIKE = re.compile(
    r"topic|group|transactional_id|regex|resource_name|^key$|coordinator_keys|^name$|_name$"
)


def _unwrap(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None)), True
    return hint, False


def sample(cls: type[Any], value: str, resource_type: int = 2) -> Any:
    """An instance of ``cls`` with ``value`` in every string, one entry in every list."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get("kafka_type") == "records":
            values[field.name] = b""
            continue
        values[field.name] = _one(hints[field.name], field.name, value, resource_type)
    return cls(**values)


def _one(hint: Any, name: str, value: str, resource_type: int) -> Any:
    hint, _ = _unwrap(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return (_one(args[0], name, value, resource_type),)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return sample(hint, value, resource_type)
    if hint is str or (isinstance(hint, type) and issubclass(hint, str)):
        return hint(value)
    if hint is bool:
        return False
    if hint is bytes:
        return b""
    if hint is uuid.UUID:
        return uuid.UUID(int=7)
    if isinstance(hint, type) and issubclass(hint, datetime.datetime):
        return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return datetime.timedelta(seconds=1)
    if isinstance(hint, type) and issubclass(hint, float):
        return hint(1.0)
    if isinstance(hint, type) and issubclass(hint, int):
        return hint(resource_type if name == "resource_type" else 0)
    raise TypeError(f"no sample for {name}: {hint!r}")


def name_paths(cls: type[Any], prefix: str = "") -> Iterator[str]:
    """Every field path of ``cls`` whose field name looks like a resource's name."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint, _ = _unwrap(hints[field.name])
        path = prefix + field.name
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple:
            item = args[0]
            if isinstance(item, type) and dataclasses.is_dataclass(item):
                yield from name_paths(item, path + "[].")
            elif NAME_LIKE.search(field.name):
                yield path + "[]"
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from name_paths(hint, path + ".")
        elif NAME_LIKE.search(field.name):
            yield path


def values_at(entity: Any, path: str) -> list[Any]:
    """The values on ``path`` in ``entity`` (lists flattened)."""
    current = [entity]
    for segment in path.split("."):
        many = segment.endswith("[]")
        field = segment[:-2] if many else segment
        nxt: list[Any] = []
        for item in current:
            value = getattr(item, field, None)
            if value is None:
                continue
            nxt.extend(value if many else [value])
        current = nxt
    return current
