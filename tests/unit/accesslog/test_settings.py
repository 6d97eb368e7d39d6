"""The ``accesslog`` and ``metrics`` sections validate with the rest of the configuration."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

BASE: dict[str, Any] = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {
            "name": "public",
            "bootstrap_port": 19092,
            "broker_port_base": 19100,
            "advertised_host": "localhost",
        }
    ],
}


def test_sections_are_optional() -> None:
    config = parse_config(BASE)
    assert config.accesslog is None and config.metrics is None


def test_defaults_when_present() -> None:
    config = parse_config({**BASE, "accesslog": {}, "metrics": {}})
    assert config.accesslog is not None and config.metrics is not None
    assert config.accesslog.path == Path("logs/access.log")
    assert config.accesslog.on_full == "drop"
    assert config.accesslog.topic is None
    assert (config.metrics.bind_host, config.metrics.port) == ("127.0.0.1", 9404)


def test_topic_and_block_mode() -> None:
    config = parse_config(
        {
            **BASE,
            "accesslog": {"path": None, "on_full": "block", "topic": {"name": "kgw.access"}},
        }
    )
    assert config.accesslog is not None and config.accesslog.topic is not None
    assert config.accesslog.topic.acks == -1


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"on_full": "wait"}, "accesslog.on_full"),
        ({"max_bytes": 10}, "accesslog.max_bytes"),
        ({"max_files": 0}, "accesslog.max_files"),
        ({"path": None}, "needs a path, a topic or both"),
        ({"topic": {"name": "bad topic"}}, "accesslog.topic.name"),
        ({"topic": {"name": "t", "acks": 0}}, "accesslog.topic.acks"),
        ({"colour": "red"}, "accesslog.colour"),
    ],
)
def test_bad_accesslog_settings_name_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({**BASE, "accesslog": section})


def test_bad_metrics_port_names_the_key() -> None:
    with pytest.raises(ConfigError, match=re.escape("metrics.port")):
        parse_config({**BASE, "metrics": {"port": 70000}})
