"""Response parts for denied request parts, built from kio schemas.

``mirror(response_item_cls, request_item, code)`` makes the response entry a
broker would return for one request entry it refused: same-named identifying
fields copied (topic name, resource name, group id…), the partitions listed
again with their indexes, every ``error_code`` set to ``code``, everything else
neutral. It works across API versions because kio keeps Kafka's field names.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.errors import _hints, _neutral

_NAME_FIELDS = ("name", "topic", "topic_name")
_PARTITION_INDEX_FIELDS = ("partition_index", "index", "partition", "partition_id")
_PARTITION_LIST_FIELDS = ("partitions", "partition_data", "partition_indexes")


def _entity_tuple_item(cls: type[Any], field: dataclasses.Field[Any]) -> type[Any] | None:
    hint = _hints(cls)[field.name]
    if typing.get_origin(hint) is not tuple:
        return None
    (item, *_rest) = typing.get_args(hint)
    return item if isinstance(item, type) and dataclasses.is_dataclass(item) else None


def _first(obj: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def _partition_indexes(request_item: Any) -> list[int]:
    entries = _first(request_item, _PARTITION_LIST_FIELDS)
    if entries is None:
        return []
    indexes = []
    for entry in entries:
        if isinstance(entry, int):
            indexes.append(entry)
        else:
            indexes.append(int(_first(entry, _PARTITION_INDEX_FIELDS)))
    return indexes


def _partition(cls: type[Any], index: int, code: ErrorCode) -> Any:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in _PARTITION_INDEX_FIELDS:
            values[field.name] = index
        elif field.name in ("high_watermark", "committed_offset"):  # Kafka's -1 on errors
            values[field.name] = -1
        elif field.metadata.get("kafka_type") == "error_code" or field.name.endswith("error_code"):
            values[field.name] = code
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            values[field.name] = _neutral(cls, field, code)
    return cls(**values)


def mirror(cls: type[Any], request_item: Any, code: ErrorCode) -> Any:
    """The response entry of ``cls`` refusing ``request_item`` with ``code``."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        name = field.name
        item_cls = _entity_tuple_item(cls, field)
        if field.metadata.get("kafka_type") == "error_code" or name.endswith("error_code"):
            values[name] = code
        elif name in _NAME_FIELDS and _first(request_item, _NAME_FIELDS) is not None:
            values[name] = _first(request_item, _NAME_FIELDS)
        elif (
            hasattr(request_item, name)
            and item_cls is None
            and not isinstance(getattr(request_item, name), tuple)
        ):
            values[name] = getattr(request_item, name)
        elif item_cls is not None and any(
            f.name in _PARTITION_INDEX_FIELDS for f in dataclasses.fields(item_cls)
        ):
            values[name] = tuple(
                _partition(item_cls, i, code) for i in _partition_indexes(request_item)
            )
        elif item_cls is not None and isinstance(getattr(request_item, name, None), tuple):
            values[name] = tuple(
                mirror(item_cls, entry, code) for entry in getattr(request_item, name)
            )
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            values[name] = _neutral(cls, field, code)
    return cls(**values)


def list_item_type(cls: type[Any], field_name: str) -> type[Any]:
    """The entity type of a tuple field (e.g. the topic entries of a response)."""
    for field in dataclasses.fields(cls):
        if field.name == field_name:
            item = _entity_tuple_item(cls, field)
            if item is not None:
                return item
    raise TypeError(f"{cls.__name__}.{field_name} is not a list of entities")
