"""``upstream.tenant_identities`` and ``authorization.gateway_checks`` at start-up."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config


def _config(**more: Any) -> dict[str, Any]:
    upstream: dict[str, Any] = {"bootstrap_servers": ["127.0.0.1:9092"]}
    upstream.update(more.pop("upstream", {}))
    return {
        "upstream": upstream,
        "listeners": [{"name": "l", "bootstrap_port": 9000, "broker_port_base": 9100,
                       "advertised_host": "127.0.0.1", "max_node_id": 10}],
        **more,
    }  # fmt: skip


SASL = {"mechanism": "SCRAM-SHA-512", "username": "kgw", "password_file": "/p"}
TENANTS = {"secret_file": "/s"}


def test_defaults_and_a_full_section() -> None:
    config = parse_config(_config(upstream={"sasl": SASL, "tenant_identities": TENANTS},
                                  authorization={}))  # fmt: skip
    ids = config.upstream.tenant_identities
    assert ids is not None and ids.enabled and ids.mechanism == "SCRAM-SHA-512"
    assert ids.rotate_interval_s == 86_400 and ids.acl_sync_interval_s == 30
    assert config.authorization is not None and config.authorization.gateway_checks


def test_tenant_identities_need_upstream_sasl_and_authorization() -> None:
    with pytest.raises(ConfigError, match=r"needs upstream\.sasl"):
        parse_config(_config(upstream={"tenant_identities": TENANTS}, authorization={}))
    with pytest.raises(ConfigError, match=r"needs upstream\.sasl"):
        parse_config(_config(upstream={"sasl": SASL, "tenant_identities": TENANTS}))


def test_gateway_checks_off_is_refused_without_tenant_identities() -> None:
    with pytest.raises(ConfigError, match="gateway_checks: false is refused"):
        parse_config(_config(upstream={"sasl": SASL}, authorization={"gateway_checks": False}))
    off = {**TENANTS, "enabled": False}
    with pytest.raises(ConfigError, match="gateway_checks: false is refused"):
        parse_config(_config(upstream={"sasl": SASL, "tenant_identities": off},
                             authorization={"gateway_checks": False}))  # fmt: skip
    parse_config(_config(upstream={"sasl": SASL, "tenant_identities": TENANTS},
                         authorization={"gateway_checks": False}))  # fmt: skip


def test_bounds() -> None:
    for bad in ({"rotate_interval_s": 10}, {"acl_sync_interval_s": 0}, {"mechanism": "PLAIN"},
                {"user_prefix": "Bad_"}, {"secret": "inline"}):  # fmt: skip
        with pytest.raises(ConfigError, match="tenant_identities"):
            parse_config(_config(upstream={"sasl": SASL, "tenant_identities": {**TENANTS, **bad}},
                                 authorization={}))  # fmt: skip


def test_the_commented_example_is_valid() -> None:
    """examples/gateway.yaml carries upstream.tenant_identities commented out."""
    from pathlib import Path

    import yaml

    text = (Path(__file__).parents[3] / "examples" / "gateway.yaml").read_text()
    start = text.index("\n  # tenant_identities:") + 1
    block = text[start:].split("\n\n")[0].splitlines()
    data = yaml.safe_load("\n".join(line[4:] for line in block if line.startswith("  # ")))
    config = parse_config(_config(upstream={"sasl": SASL, **data}, authorization={}))
    ids = config.upstream.tenant_identities
    assert ids is not None and ids.enabled and ids.rotate_interval_s == 86_400
