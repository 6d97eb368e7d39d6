"""examples/gateway.yaml shows every key of the configuration model.

Walks ``GatewayConfig`` (and every section model it nests, whatever module defines
it: optional sections, lists of sections, maps of named sections) and collects the
dotted path of each key. The example's paths come from its text, commented-out
lines included: each line is uncommented (``# key:`` as ``key:``, nested ``#   #``
too) and placed by its indentation, list items (``- key:``) by the key's column.
Every schema path must be in the example, at the same nesting; a key removed from
the example, or added to the model without an example line, fails here.

Maps whose keys are user-chosen names (``quotas.plans.<name>``) are written ``*`` in
the schema's paths: any example name will do (``quotas.plans.bronze.requests``).
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from gateway.config import GatewayConfig
from gateway.encryption.settings import EncryptionSettings

EXAMPLE = Path(__file__).parents[2] / "examples" / "gateway.yaml"
ANY_NAME = "*"  # a path segment that is a user-chosen name
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*))?$")

Path_ = tuple[str, ...]


def _models_in(annotation: Any) -> list[tuple[Path_, type[BaseModel]]]:
    """The section models a field holds, with the path segments between the field's
    key and the model's keys (a map's user-chosen name: ``*``; a list item: none)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [((), annotation)]
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [found for arg in args for found in _models_in(arg)]
    if origin in (list, tuple, set, frozenset) and args:
        return [found for arg in args if arg is not Ellipsis for found in _models_in(arg)]
    if origin is dict and args:
        return [((ANY_NAME, *seg), model) for seg, model in _models_in(args[1])]
    return []


def schema_paths(model: type[BaseModel], prefix: Path_ = ()) -> set[Path_]:
    """Every key path of ``model``: leaves and the keys that hold a section."""
    paths: set[Path_] = set()
    for name, field in model.model_fields.items():
        path = (*prefix, field.alias or name)
        paths.add(path)
        for segments, nested in _models_in(field.annotation):
            paths |= schema_paths(nested, (*path, *segments))
    return paths


def _uncomment(line: str) -> tuple[int, str]:
    """A line's content and its column once every leading ``#`` (and the one space
    after it) is taken away: ``    # key: v`` is ``key: v`` at 4, ``#   key: v`` at 2."""
    column, rest = 0, line.rstrip()
    while True:
        content = rest.lstrip(" ")
        column += len(rest) - len(content)
        if content.startswith("#"):
            rest = content[1:]
            rest = rest[1:] if rest.startswith(" ") else rest
        elif content.startswith("- "):  # a list item: its key sits after the dash
            rest = content[2:]
            column += 2
        else:
            return column, content


def _flow_keys(value: str, path: Path_) -> set[Path_]:
    """The keys of a flow mapping written on one line (``sasl: {mechanism: ...}``)."""
    try:
        data = yaml.safe_load(value)
    except yaml.YAMLError:
        return set()
    found: set[Path_] = set()
    stack: list[tuple[Path_, object]] = [(path, data)]
    while stack:
        where, node = stack.pop()
        items = node if isinstance(node, list) else [node]
        for item in items:
            if isinstance(item, dict):
                for key, sub in item.items():
                    found.add((*where, str(key)))
                    stack.append(((*where, str(key)), sub))
    return found


def example_paths(text: str) -> set[Path_]:
    """Every key path the example shows, set or commented out."""
    paths: set[Path_] = set()
    open_keys: list[tuple[int, str]] = []  # (column, key) of the keys enclosing a line
    for line in text.splitlines():
        column, content = _uncomment(line)
        found = _KEY.match(content)
        if found is None:
            continue
        while open_keys and open_keys[-1][0] >= column:
            open_keys.pop()
        path = (*(key for _, key in open_keys), found.group(1))
        paths.add(path)
        value = (found.group(2) or "").strip()
        if value.startswith("{"):
            paths |= _flow_keys(value, path)
        open_keys.append((column, found.group(1)))
    return paths


def _matches(wanted: Path_, shown: Path_) -> bool:
    return len(wanted) == len(shown) and all(
        w in (s, ANY_NAME) for w, s in zip(wanted, shown, strict=True)
    )


def missing(wanted: set[Path_], shown: set[Path_]) -> list[str]:
    """The wanted paths (``*``: any name) the example does not show, dotted."""
    named = {p for p in wanted if ANY_NAME in p}
    absent = (wanted - named) - shown
    absent |= {p for p in named if not any(_matches(p, s) for s in shown)}
    return sorted(".".join(p) for p in absent)


def test_the_walkers_see_nesting() -> None:
    paths = schema_paths(GatewayConfig)
    assert ("listeners", "tls", "client_cas", "ca_file") in paths  # a list in a list
    assert ("quotas", "plans", ANY_NAME, "mutations_burst") in paths  # a map of sections
    assert ("monitoring", "canary", "sasl", "password_file") in paths  # optional section
    assert ("monitoring", "lag", "thresholds", ANY_NAME) not in paths  # a map of numbers
    text = (
        "a:\n"
        "  b: 1  # note: not a key\n"
        "  # c:\n"
        "  #   d: 2\n"
        "# e:\n"
        "#   - f: {g: 3, h: {i: 4}}\n"
        "#     # j: 5\n"
        "k: 6\n"
    )
    assert example_paths(text) == {
        ("a",),
        ("a", "b"),
        ("a", "c"),
        ("a", "c", "d"),
        ("e",),
        ("e", "f"),
        ("e", "f", "g"),
        ("e", "f", "h"),
        ("e", "f", "h", "i"),
        ("e", "j"),
        ("k",),
    }
    assert missing({("p", ANY_NAME, "x")}, {("p", "gold", "x")}) == []
    assert missing({("p", ANY_NAME, "y")}, {("p", "gold", "x")}) == ["p.*.y"]


def test_the_example_shows_every_key() -> None:
    shown = example_paths(EXAMPLE.read_text(encoding="utf-8"))
    absent = missing(schema_paths(GatewayConfig), shown)
    assert not absent, (
        f"{EXAMPLE.name} lacks these keys of the configuration model (add each, set or "
        f"as a commented-out '# key: value  # meaning, default' line): {', '.join(absent)}"
    )


def test_the_example_shows_the_encryption_filters_settings() -> None:
    """The encryption filter ships with the gateway: its ``config:`` (a ``filters:``
    entry's settings, free-form to ``GatewayConfig``) is shown as well."""
    shown = example_paths(EXAMPLE.read_text(encoding="utf-8"))
    absent = missing(schema_paths(EncryptionSettings, ("filters", "config")), shown)
    assert not absent, f"{EXAMPLE.name} lacks these encryption filter settings: {absent}"
