"""gateway/filters/loader.py and the ``filters:`` section: building the configured
filters at start-up, and every way that fails naming ``filters[i]``."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.filters import loader
from gateway.filters.api import FilterError
from gateway.filters.chain import FilterChain
from gateway.filters.settings import FilterConfig

from .samples import Recorder

SAMPLES = "tests.unit.filters.samples"
GOOD = {"module": f"{SAMPLES}:Recorder"}
BASE = {
    "upstream": {"bootstrap_servers": ["10.0.0.1:9092"]},
    "listeners": [
        {"name": "public", "bootstrap_port": 9092, "broker_port_base": 9100,
         "advertised_host": "k.example.com"}
    ],
}  # fmt: skip


def configs(*entries: dict[str, Any]) -> list[FilterConfig]:
    return [FilterConfig.model_validate(entry) for entry in entries]


def test_a_module_path_builds_the_filter_with_its_config() -> None:
    chain = loader.build_chain(configs({**GOOD, "config": {"limit": 3}}))
    assert isinstance(chain, FilterChain)
    (made,) = chain.filters
    assert isinstance(made, Recorder)
    assert made.config == {"limit": 3}
    assert made.name == "recorder"
    assert chain.wants(0) and chain.wants(1) and not chain.wants(3)


def test_a_factory_function_and_the_configured_name() -> None:
    entry = {"module": f"{SAMPLES}:make_recorder", "name": "audit-copy"}
    (made,) = loader.build_chain(configs(entry)).filters
    assert isinstance(made, Recorder)
    assert made.name == "audit-copy"


def test_filters_keep_their_configured_order() -> None:
    chain = loader.build_chain(
        configs({**GOOD, "name": "first"}, {**GOOD, "name": "second"}, {**GOOD, "name": "third"})
    )
    assert [f.name for f in chain.filters] == ["first", "second", "third"]


def test_no_filters_is_an_empty_chain() -> None:
    assert not loader.build_chain([])


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"module": "tests.unit.filters.no_such_module:Thing"}, "cannot import"),
        ({"module": f"{SAMPLES}:Missing"}, f"{SAMPLES} has no Missing"),
        ({"module": f"{SAMPLES}:Strict"}, "refused its config: limit is required"),
        ({"module": f"{SAMPLES}:NotAFilter"}, "returned NotAFilter, which lacks"),
        ({"module": f"{SAMPLES}:ListKeys"}, "api_keys must be a set of API key numbers"),
        ({"module": f"{SAMPLES}:NamedKeys"}, "api_keys must be a set of API key numbers"),
        ({"module": f"{SAMPLES}:Frozen", "name": "renamed"}, "cannot set the name"),
    ],
    ids=["no-module", "no-attribute", "factory-raises", "not-a-filter", "keys-list",
         "keys-names", "name-fixed"],
)  # fmt: skip
def test_a_broken_filter_names_its_entry(entry: dict[str, Any], reason: str) -> None:
    with pytest.raises(FilterError) as info:
        loader.build_chain(configs(GOOD, entry))
    text = str(info.value)
    assert text.startswith("filters[1]: "), text  # the second entry, not the first
    assert reason in text


def entry_point(value: str, name: str = "guard") -> EntryPoint:
    return EntryPoint(name=name, value=value, group=loader.ENTRY_POINT_GROUP)


def installed(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> list[dict[str, Any]]:
    """Replace the installed distributions' entry points; returns the look-ups made."""
    asked: list[dict[str, Any]] = []

    def entry_points(**selection: Any) -> list[EntryPoint]:
        asked.append(selection)
        return [p for p in points if p.group == selection["group"] and p.name == selection["name"]]

    monkeypatch.setattr(loader, "entry_points", entry_points)
    return asked


def test_an_entry_point_builds_the_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = installed(monkeypatch, entry_point(f"{SAMPLES}:Recorder"))
    (made,) = loader.build_chain(configs({"entry_point": "guard", "config": {"k": 1}})).filters
    assert asked == [{"group": "kgw.filters", "name": "guard"}]
    assert isinstance(made, Recorder) and made.config == {"k": 1}


def test_an_entry_point_that_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, entry_point(f"{SAMPLES}:Recorder", name="other"))
    with pytest.raises(FilterError, match=r"^filters\[0\]: no kgw.filters entry point 'guard'$"):
        loader.build_chain(configs({"entry_point": "guard"}))


def test_an_entry_point_that_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, entry_point("tests.unit.filters.gone:Thing"))
    with pytest.raises(FilterError, match=r"^filters\[0\]: cannot load entry point 'guard'"):
        loader.build_chain(configs({"entry_point": "guard"}))


def test_an_entry_points_factory_refusing_its_config(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, entry_point(f"{SAMPLES}:Strict"))
    with pytest.raises(FilterError) as info:
        loader.build_chain(configs({"entry_point": "guard"}))
    assert str(info.value) == (
        "filters[0]: entry point 'guard' refused its config: limit is required"
    )


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"module": f"{SAMPLES}:Recorder", "entry_point": "guard"}, "exactly one of module"),
        ({"config": {"pattern": "x"}}, "exactly one of module"),
        ({"module": SAMPLES}, "filters.0.module"),  # no ":Factory"
        ({"module": f"{SAMPLES}:Recorder", "settings": {}}, "filters.0.settings"),
        ({"module": f"{SAMPLES}:Recorder", "name": "has space"}, "filters.0.name"),
        ({"entry_point": ""}, "filters.0.entry_point"),
    ],
    ids=["both", "neither", "no-factory", "unknown-key", "bad-name", "empty-entry-point"],
)
def test_the_section_is_validated_with_the_configuration(
    entry: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "filters": [entry]}, "gateway.yaml")
    text = str(info.value)
    assert text.startswith("gateway.yaml: filters.0"), text
    assert reason in text


def test_a_valid_section_parses_in_order() -> None:
    config = parse_config(
        {**BASE, "filters": [{**GOOD, "config": {"a": [1]}}, {"entry_point": "guard"}]}
    )
    assert [(f.module, f.entry_point, f.config) for f in config.filters] == [
        (f"{SAMPLES}:Recorder", None, {"a": [1]}),
        (None, "guard", {}),
    ]
