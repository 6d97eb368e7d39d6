"""The ``quotas:`` configuration section."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

BASE: dict[str, Any] = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {
            "name": "l",
            "bootstrap_port": 30001,
            "broker_port_base": 30010,
            "advertised_host": "localhost",
            "max_node_id": 4,
        }
    ],
}


def test_absent_means_no_quotas() -> None:
    assert parse_config(BASE).quotas is None


def test_defaults() -> None:
    quotas = parse_config({**BASE, "quotas": {}}).quotas
    assert quotas is not None
    assert (quotas.redis_url, quotas.on_redis_failure, quotas.max_throttle_ms) == (
        None,
        "open",
        10000,
    )
    assert quotas.lease_fraction == 0.1 and quotas.topic_prefix == "{tenant}."


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"on_redis_failure": "maybe"}, "quotas.on_redis_failure"),
        ({"redis_url": "http://x"}, "quotas.redis_url"),
        ({"lease_fraction": 0}, "quotas.lease_fraction"),
        ({"default_plan": "gold"}, "quotas"),
        ({"plans": {"gold": {"produce_bytes": -1}}}, "quotas.plans.gold.produce_bytes"),
        ({"plans": {"gold": {"max_topic": 1}}}, "quotas.plans.gold.max_topic"),
        ({"plans": {"bad name": {}}}, "quotas.plans.bad name"),
        ({"topic_prefix": "x.{tenant}"}, "quotas.topic_prefix"),
        ({"address_limits": {"max_connections": -1}}, "quotas.address_limits.max_connections"),
    ],
)
def test_bad_values_name_the_key(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({**BASE, "quotas": section})
    assert path in str(caught.value)


def test_a_redis_password_never_appears_in_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({**BASE, "quotas": {"redis_url": "http://u:s3cret@h"}})
    assert "s3cret" not in str(caught.value)
