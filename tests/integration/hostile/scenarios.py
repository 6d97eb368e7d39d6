"""The scenario table, attacks.yaml, read into ``Attack`` entries (its header says what
each field means). ``$name`` placeholders become the run's values from ``stack.Ctx``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from .stack import Ctx

TABLE = Path(__file__).with_name("attacks.yaml")
MB = 1 << 20
CHECKS = ("named", "whole", "leak")
_PLACEHOLDER = re.compile(r"\$([a-z_0-9]+)")
_KEYS = {name: key for key, name in api_key_map.items()}


@dataclass(frozen=True)
class Attack:
    id: str
    api: int
    template: Callable[[Ctx], dict[str, Any]]
    route: str | None
    check: str
    denied: frozenset[int] = frozenset()
    needs: str | None = None
    own: Callable[[Ctx], list[Any]] | None = None
    may_be_empty: bool = False
    optional: bool = False
    low: int = 0
    modes: tuple[str, ...] | None = None  # None: every mode of stack.MODES
    instead: str | None = None  # the entry run in the other modes


def _value(ctx: Ctx, name: str) -> Any:
    if name == "victim_user":
        return ctx.victim_principal.removeprefix("User:")
    return getattr(ctx, name)


def substitute(value: Any, ctx: Ctx) -> Any:
    """``value`` with every ``$name`` replaced (a whole ``$name`` keeps its type: ids
    stay UUIDs, producer ids ints, records bytes)."""
    if isinstance(value, dict):
        return {k: substitute(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, ctx) for v in value]
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return _value(ctx, whole.group(1))
        return _PLACEHOLDER.sub(lambda m: str(_value(ctx, m.group(1))), value)
    return value


def _attack(entry: dict[str, Any]) -> Attack:
    send, own = entry["send"], entry.get("own")
    assert entry["check"] in CHECKS, entry["id"]
    return Attack(
        id=entry["id"],
        api=_KEYS[entry["api"]],
        template=lambda ctx: substitute(send, ctx),
        route=entry["route"],
        check=entry["check"],
        denied=frozenset(int(ErrorCode[name]) for name in entry.get("denied", ())),
        needs=entry.get("needs"),
        own=(lambda ctx: substitute(own, ctx)) if own else None,
        may_be_empty=bool(entry.get("may_be_empty", False)),
        optional=bool(entry.get("optional", False)),
        low=int(entry.get("low", 0)),
        modes=tuple(entry["modes"]) if "modes" in entry else None,
        instead=entry.get("instead"),
    )


@cache
def load() -> tuple[Attack, ...]:
    attacks = tuple(_attack(entry) for entry in yaml.safe_load(TABLE.read_text()))
    ids = [a.id for a in attacks]
    assert len(set(ids)) == len(ids), "duplicate attack ids in attacks.yaml"
    return attacks


ATTACKS = list(load())


def by_id() -> dict[str, Attack]:
    return {a.id: a for a in ATTACKS}
