"""Renaming the name fields of a kio message, given their paths. Pure.

A path names a field the way ``enforcement.resources`` does: ``topics[].name`` (the
``name`` of every entry of ``topics``), ``groups_names[]`` (every string of a list),
``group_id`` (a field of the message). ``rename`` returns a new message (kio messages
are frozen) with ``fn`` applied to every string on those paths; a path whose field a
version lacks is skipped, ``None`` (a null list, a null id) is left as it is.

When ``fn`` returns ``None`` the name is foreign (another tenant's): a string of a
list is dropped from it, an entry of a list whose name is foreign is dropped whole,
and a foreign field of the message itself is blanked (``''``). That is how a response
shows only the tenant's own resources.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

Rename = Callable[[str], str | None]
Tree = dict[str, "Tree | None"]  # path segment → sub-paths (None: the name itself)
_DROP = object()


def compile_paths(paths: Iterable[str]) -> Tree:
    tree: Tree = {}
    for path in paths:
        node = tree
        segments = path.split(".")
        for segment in segments[:-1]:
            child = node.setdefault(segment, {})
            assert child is not None, f"{path}: a name cannot have fields"
            node = child
        node[segments[-1]] = None
    return tree


def rename(entity: Any, tree: Tree, fn: Rename) -> Any:
    """``entity`` with every name on ``tree`` renamed by ``fn`` (see the module doc)."""
    return _walk(entity, tree, fn, root=True)


def _walk(entity: Any, tree: Tree, fn: Rename, root: bool = False) -> Any:
    changes: dict[str, Any] = {}
    for segment, sub in tree.items():
        many = segment.endswith("[]")
        field = segment[:-2] if many else segment
        value = getattr(entity, field, None)
        if value is None:
            continue
        if many:
            items: list[Any] = []
            for item in value:
                mapped = fn(item) if sub is None else _walk(item, sub, fn)
                if mapped is not None and mapped is not _DROP:
                    items.append(mapped)
            changes[field] = tuple(items)
        elif sub is None:
            mapped = fn(value)
            if mapped is None:
                if not root:
                    return _DROP  # the entry this name belongs to is left out
                mapped = ""
            changes[field] = mapped
        else:
            nested = _walk(value, sub, fn)
            if nested is not _DROP:
                changes[field] = nested
    return dataclasses.replace(entity, **changes) if changes else entity


@cache
def message_paths(cls: Any, prefix: str = "") -> tuple[str, ...]:
    """The paths of every ``*error_message`` string of a kio response class."""
    found: list[str] = []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint = _unwrap(hints[field.name])
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        item: Any = args[0] if origin is tuple else hint
        if origin is tuple and isinstance(item, type) and dataclasses.is_dataclass(item):
            found += message_paths(item, f"{prefix}{field.name}[].")
        elif isinstance(item, type) and dataclasses.is_dataclass(item):
            found += message_paths(item, f"{prefix}{field.name}.")
        elif field.name.endswith("error_message"):
            found.append(prefix + field.name)
    return tuple(found)


def _unwrap(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint
