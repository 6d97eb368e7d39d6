"""Kafka requests of any API and version from one version-independent template, and a
scan of decoded responses for another tenant's identifiers.

A template is a plain mapping of kio field names to values (lists of mappings for
arrays of structs). ``build`` takes the fields the version's schema has, ignores the
others (so one template says ``name`` and ``topic_id`` and each version uses what it
knows), and gives every other field a neutral value. Integers in milliseconds are
accepted for kio's timedelta fields.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema

_ZERO: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "uuid": uuid.UUID(int=0),
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    "float64": 0.0,
    "string": "",
    "records": None,
}


@cache
def _hints(cls: type[Any]) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def request_class(api_key: int, version: int) -> type[Any]:
    cls: type[Any] = load_request_schema(api_key, version)
    return cls


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _is_entity(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _value(hint: Any, kafka_type: str | None, value: Any) -> Any:
    hint, optional = _strip_optional(hint)
    if value is None:
        if optional:
            return None
        return _neutral(hint, kafka_type)
    if typing.get_origin(hint) is tuple:
        (item, *_rest) = typing.get_args(hint)
        return tuple(_value(item, kafka_type, v) for v in value)
    if _is_entity(hint):
        return build(hint, value)
    if kafka_type == "bytes" and isinstance(value, str):  # scenario files write bytes as text
        return value.encode()
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if isinstance(hint, type) and issubclass(hint, int) and not isinstance(value, bool):
        return hint(value)
    return value


def _neutral(hint: Any, kafka_type: str | None) -> Any:
    if typing.get_origin(hint) is tuple:
        return ()
    if _is_entity(hint):
        return build(hint, {})
    if kafka_type in _ZERO and _ZERO[kafka_type] is not None:
        return _ZERO[kafka_type]
    if kafka_type == "records":
        return b""
    if isinstance(hint, type) and issubclass(hint, int):
        return hint(0)
    if isinstance(hint, type) and issubclass(hint, str):
        return hint("")
    raise TypeError(f"no neutral value for {hint!r}")


def build(cls: type[Any], template: Mapping[str, Any]) -> Any:
    """An instance of the kio class ``cls`` from a version-independent template."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = _hints(cls)[field.name]
        kafka_type = field.metadata.get("kafka_type")
        if field.name in template:
            values[field.name] = _value(hint, kafka_type, template[field.name])
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            _base, optional = _strip_optional(hint)
            values[field.name] = None if optional else _neutral(hint, kafka_type)
    return cls(**values)


def request(api_key: int, version: int, template: Mapping[str, Any]) -> Any:
    return build(request_class(api_key, version), template)


def has_field(api_key: int, version: int, path: str) -> bool:
    """Whether the request schema has this dotted field path (``topics.topic_id``)."""
    cls: Any = request_class(api_key, version)
    for part in path.split("."):
        if cls is None or not _is_entity(cls):
            return False
        hints = _hints(cls)
        if part not in hints:
            return False
        hint, _optional = _strip_optional(hints[part])
        cls = typing.get_args(hint)[0] if typing.get_origin(hint) is tuple else hint
    return True


def walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) below a decoded kio entity, structs included."""
    yield path, obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from walk(getattr(obj, field.name), f"{path}.{field.name}")
    elif isinstance(obj, tuple):
        for i, item in enumerate(obj):
            yield from walk(item, f"{path}[{i}]")


def mentions(obj: Any, secrets: Mapping[Any, str]) -> list[tuple[Any, str]]:
    """Where a decoded message holds one of ``secrets`` (a name, a topic id, or an id
    inside a longer string such as an error message): ``[(secret, path), ...]``."""
    found: list[tuple[Any, str]] = []
    strings = [s for s in secrets if isinstance(s, str)]
    for path, value in walk(obj):
        if isinstance(value, uuid.UUID) and value in secrets:
            found.append((value, path))
        elif isinstance(value, str):
            found.extend((s, path) for s in strings if s in value)
        elif isinstance(value, bytes) and value:
            found.extend((s, path) for s in strings if s.encode() in value)
    return found


def error_codes(obj: Any) -> list[tuple[str, int]]:
    """Every error code below a decoded entity: ``[(path, code), ...]``."""
    return [
        (path, int(value))
        for path, value in walk(obj)
        if path.rsplit(".", 1)[-1].endswith("error_code") and isinstance(value, int)
    ]


def naming(obj: Any, keys: set[Any]) -> list[tuple[str, Any]]:
    """The structs below ``obj`` with a field (or a list field) that holds one of
    ``keys``: ``[(path, struct), ...]``."""
    found = []
    for path, value in walk(obj):
        if not (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            continue
        for field in dataclasses.fields(value):
            held = getattr(value, field.name)
            items = held if isinstance(held, tuple) else (held,)
            if any(_hashable(i) and i in keys for i in items):
                found.append((path, value))
                break
    return found


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, uuid.UUID))
