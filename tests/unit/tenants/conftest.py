"""A gateway configuration with file stores in a temporary directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.authz.store import PolicyStore
from gateway.config import GatewayConfig, load_config
from gateway.credentials import open_store
from gateway.quotas.store import open_store as open_quota_store
from gateway.tenants import onboard
from gateway.tenants.store import open_tenant_store

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def write_config(directory: Path, **overrides: Any) -> Path:
    policy_dir = directory / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("# tenants\n")
    config: dict[str, Any] = {
        "upstream": {"bootstrap_servers": ["127.0.0.1:1"]},
        "listeners": [
            {
                "name": "plain",
                "bootstrap_port": 19092,
                "broker_port_base": 19100,
                "advertised_host": "kafka.example.com",
            },
            {
                "name": "tenants",
                "bootstrap_port": 29092,
                "broker_port_base": 29100,
                "advertised_host": "kafka.example.com",
                "advertised_bootstrap_port": 9093,
                "authentication": "sasl",
            },
        ],
        "sasl": {
            "mechanisms": ["PLAIN"],
            "credential_store": {"file": str(directory / "credentials.json")},
        },
        "authorization": {"policy_dir": str(policy_dir)},
        "quotas": {
            "store_file": str(directory / "quotas.json"),
            "plans": {"bronze": {"max_topics": 5, "produce_bytes": 1000000}},
        },
    }
    config.update(overrides)
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def stores_for(config: GatewayConfig) -> onboard.Stores:
    assert config.sasl is not None and config.sasl.credential_store is not None
    assert config.authorization is not None and config.quotas is not None
    cred = config.sasl.credential_store
    return onboard.Stores(
        config,
        open_store(cred),
        open_tenant_store(cred),
        PolicyStore(config.authorization.policy_dir),
        open_quota_store(config.quotas),
    )


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path)


@pytest.fixture
def config(config_path: Path) -> GatewayConfig:
    return load_config(config_path)
