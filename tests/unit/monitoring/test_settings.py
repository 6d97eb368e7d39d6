"""The ``monitoring`` section: defaults, per-tenant thresholds, bad values refused with the key."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.monitoring.service import canary_listener

BASE = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {"name": "public", "bootstrap_port": 19092, "broker_port_base": 19100,
         "advertised_host": "127.0.0.1"},
    ],
}  # fmt: skip


def test_absent_means_off_and_defaults_are_cheap() -> None:
    assert parse_config(BASE).monitoring is None
    config = parse_config(BASE | {"monitoring": {}})
    assert config.monitoring is not None
    assert config.monitoring.health.interval_s == 30 and config.monitoring.lag.interval_s == 30
    assert config.monitoring.canary.enabled is False


def test_thresholds_per_tenant() -> None:
    config = parse_config(
        BASE | {"monitoring": {"lag": {"threshold": 10, "thresholds": {"acme": 99}}}}
    )
    assert config.monitoring is not None
    assert config.monitoring.lag.threshold_for("acme") == 99
    assert config.monitoring.lag.threshold_for("beta") == 10


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"health": {"interval_s": 0}}, "monitoring.health.interval_s"),
        ({"lag": {"thresholds": {"Not_A_Tenant": 1}}}, "monitoring.lag.thresholds"),
        ({"canary": {"availability_sla": 1.5}}, "monitoring.canary.availability_sla"),
        ({"canary": {"sasl": {"mechanism": "PLAIN", "username": "c", "password": "x"}}},
         "monitoring.canary.sasl"),
        ({"bogus": 1}, "monitoring.bogus"),
    ],
)  # fmt: skip
def test_bad_values_name_their_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config(BASE | {"monitoring": section})


def test_canary_listener_by_name() -> None:
    config = parse_config(BASE | {"monitoring": {"canary": {"listener": "public"}}})
    assert config.monitoring is not None
    assert canary_listener(config, config.monitoring.canary).name == "public"
    with pytest.raises(ConfigError, match=r"monitoring\.canary\.listener 'nope' is not a listener"):
        parse_config(BASE | {"monitoring": {"canary": {"listener": "nope"}}})
