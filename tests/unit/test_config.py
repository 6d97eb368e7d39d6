from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, parse_config

GOOD = {
    "upstream": {"bootstrap_servers": ["10.0.0.1:9092"]},
    "listeners": [
        {
            "name": "public",
            "bootstrap_port": 9092,
            "broker_port_base": 9100,
            "advertised_host": "k.example.com",
        }
    ],
}


def test_example_config_is_valid() -> None:
    config = load_config(Path(__file__).parents[2] / "examples" / "gateway.yaml")
    assert config.listeners


def test_minimal_config_gets_defaults() -> None:
    config = parse_config(GOOD)
    assert config.limits.max_request_bytes == 100 * 1024 * 1024
    assert config.listeners[0].public_port_base == 9100


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"upstream": {"bootstrap_servers": ["nohost"]}}, "upstream.bootstrap_servers"),
        ({"upstream": {"bootstrap_servers": []}}, "upstream.bootstrap_servers"),
        ({"limits": {"max_request_bytes": 10}}, "limits.max_request_bytes"),
        ({"limits": {"unknown_key": 1}}, "limits.unknown_key"),
        ({"listeners": [{**GOOD["listeners"][0], "broker_port_base": 65000}]}, "listeners.0"),  # type: ignore[dict-item]
        (
            {"listeners": [{**GOOD["listeners"][0], "bootstrap_port": 9105}]},
            "per-broker port range",
        ),  # type: ignore[dict-item]
    ],
)
def test_bad_config_names_key_path(patch: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**GOOD, **patch})
    assert message in str(info.value)


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("upstream: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
