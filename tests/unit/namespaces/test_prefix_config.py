"""``namespaces.prefix_format`` must be the prefix tenant names are checked against
(the quotas' ``topic_prefix``, ``{tenant}.`` without quotas): otherwise one tenant's
namespace can hold another's names (``acme`` + ``-`` reaching ``acme-eu-…``)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

BASE: dict[str, Any] = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [{"name": "l", "bootstrap_port": 30001, "broker_port_base": 30010,
                   "advertised_host": "localhost", "max_node_id": 4}],
}  # fmt: skip


def test_default_prefixes_agree() -> None:
    assert parse_config({**BASE, "namespaces": {}, "quotas": {}}).namespaces is not None
    assert parse_config({**BASE, "namespaces": {}}).namespaces is not None


def test_the_same_other_prefix_is_accepted() -> None:
    config = {**BASE, "namespaces": {"prefix_format": "{tenant}_"},
              "quotas": {"topic_prefix": "{tenant}_"}}  # fmt: skip
    assert parse_config(config).namespaces is not None


@pytest.mark.parametrize(
    "quotas", [None, {"topic_prefix": "{tenant}."}, {"topic_prefix": "{tenant}_"}]
)
def test_a_prefix_other_than_the_quotas_is_refused(quotas: dict[str, Any] | None) -> None:
    config: dict[str, Any] = {**BASE, "namespaces": {"prefix_format": "{tenant}-"}}
    if quotas is not None:
        config["quotas"] = quotas
    with pytest.raises(ConfigError, match="prefix_format"):
        parse_config(config)
