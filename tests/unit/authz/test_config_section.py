"""The ``authorization`` section of the gateway configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, load_config, parse_config

from .conftest import REPO

BASE: dict[str, Any] = {
    "upstream": {"bootstrap_servers": ["10.0.0.1:9092"]},
    "listeners": [
        {"name": "p", "bootstrap_port": 9092, "broker_port_base": 9100, "advertised_host": "k"}
    ],
}


def test_absent_means_no_authorization() -> None:
    assert parse_config(BASE).authorization is None


def test_defaults() -> None:
    auth = parse_config({**BASE, "authorization": {}}).authorization
    assert auth is not None
    assert auth.policy_dir == Path("policies")
    assert (auth.model_file, auth.policy_file) == ("model.conf", "policy.csv")
    assert auth.super_users == [] and auth.redis is None
    assert auth.reload_interval_s == 0.25 and auth.cache_size == 100_000


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"super_users": ["admin"]}, "authorization.super_users.0"),
        ({"reload_interval_s": 0}, "authorization.reload_interval_s"),
        ({"cache_size": -1}, "authorization.cache_size"),
        ({"redis": {"url": "http://x"}}, "authorization.redis.url"),
        ({"redis": {"url": "redis://h:6379", "channel": ""}}, "authorization.redis.channel"),
        ({"policy_directory": "x"}, "authorization.policy_directory"),
    ],
)
def test_bad_values_name_the_key(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError, match=path.replace(".", r"\.")):
        parse_config({**BASE, "authorization": section})


def test_a_redis_password_never_appears_in_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "authorization": {"redis": {"url": "http://u:s3cret@h"}}})
    assert "s3cret" not in str(info.value)


def test_the_example_configures_authorization() -> None:
    auth = load_config(REPO / "examples" / "gateway.yaml").authorization
    assert auth is not None and auth.super_users
