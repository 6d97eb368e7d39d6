"""Enums the hot paths key dictionaries and sets by."""

from __future__ import annotations

import enum


class HotEnum(enum.Enum):
    """An ``Enum`` hashed by identity, in C.

    ``Enum.__hash__`` is Python code (``hash(self._name_)``), run on every dict or set
    lookup by a member: per request, that is the connection state machine's table and
    the quota engine's counters. Members are singletons compared by identity (``Enum``
    defines no ``__eq__``), so ``object.__hash__`` agrees with equality; the only thing
    that changes is the order in which a set of members iterates, which no code here
    relies on (both hashes differ between processes anyway)."""

    __hash__ = object.__hash__
