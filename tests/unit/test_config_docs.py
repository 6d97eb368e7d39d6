"""docs/configuration.md documents every key of the configuration model.

Walks ``GatewayConfig`` (and every section model it nests, whatever module defines
it) and checks each leaf key's path appears in the reference: under the section
heading naming its prefix (``### `listeners[].tls` ``), as a table row key relative
to it (``client_cas[].ca_file``). Lists of sections are written ``name[]``, maps
``name.<key>``. A key added to the model without a row fails here.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gateway.config import GatewayConfig

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"
_HEADING = re.compile(r"^#{2,4} `([^`]+)`", re.MULTILINE)
_SPAN = re.compile(r"`([^`]+)`")
_PLACEHOLDER = re.compile(r"<[^>]*>")


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The section models a field holds, with the path suffix their keys take."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [found for arg in args for found in _models_in(arg)]
    if origin is list:
        return [("[]" + s, m) for s, m in _models_in(args[0])]
    if origin is dict:
        return [(".<>" + s, m) for s, m in _models_in(args[1])]
    return []


def model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every leaf key path of ``model`` (a key holding a section is not a leaf)."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _models_in(field.annotation)
        if not nested:
            keys.add(path)
        for suffix, sub in nested:
            keys |= model_keys(sub, f"{path}{suffix}.")
    return keys


def _row_keys(first_cell: str, rest: str) -> set[str]:
    """Keys one table row documents: every code span of its first cell (a bare name
    after a dotted one is its sibling); ``<rate>_burst`` takes its names from the row."""
    spans = _SPAN.findall(first_cell)
    if not spans:
        return set()
    parent = spans[0].rpartition(".")[0]
    keys = {spans[0]} | {f"{parent}.{s}" if parent and "." not in s else s for s in spans[1:]}
    last = spans[0].rpartition(".")[2]
    if _PLACEHOLDER.search(last):
        keys |= {f"{parent}.{s}" for s in _SPAN.findall(rest) if "." not in s}
    return keys


def documented_keys(text: str) -> set[str]:
    """Every ``section.key`` path the reference's tables document."""
    keys: set[str] = set()
    section = ""
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(1)
            continue
        if not line.startswith("| ") or line.startswith("| ---") or not section:
            continue
        first, _, rest = line[2:].partition(" | ")
        for key in _row_keys(first, rest):
            keys.add(_PLACEHOLDER.sub("<>", f"{section}.{key}"))
    return keys


def _loose(key: str) -> str:
    """The ``listeners`` section documents each listener: ``[]`` is left out of the match."""
    return key.replace("[]", "")


def test_every_configuration_key_is_documented() -> None:
    documented = {_loose(key) for key in documented_keys(DOC.read_text())}
    missing = {key for key in model_keys(GatewayConfig) if _loose(key) not in documented}
    assert sorted(missing) == []


def test_the_walk_sees_nested_sections_lists_and_maps() -> None:
    keys = model_keys(GatewayConfig)
    assert "listeners[].tls.client_cas[].ca_file" in keys
    assert "quotas.plans.<>.produce_bytes" in keys
    assert "sasl.failure_limiter.max_failures" in keys
    assert "upstream.tls" not in keys  # a section, documented by its own keys


def test_a_key_without_a_row_is_caught() -> None:
    text = "## `limits`\n\n| key | default |\n| --- | --- |\n| `max_request_bytes` | 1 |\n"
    assert documented_keys(text) == {"limits.max_request_bytes"}
    assert "limits.idle_timeout_s" not in documented_keys(text)
