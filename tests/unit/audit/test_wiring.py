"""The gateway's side: Kafka admin API changes reach the trail as ``kafka:<principal>``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.audit import AuditError, AuditTrail, kafka_actor, scrub, write_new_key
from gateway.audit.settings import AuditConfig
from gateway.audit.wiring import attach_audit
from gateway.authz.casbin_model import MODEL_CONF
from gateway.authz.model import AclFilter
from gateway.authz.store import PolicyStore
from gateway.config import ConfigError, parse_config
from gateway.quotas.model import Target, TargetType
from gateway.quotas.store import FileQuotaStore

from ..authz.conftest import rule

BASE = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {"name": "a", "bootstrap_port": 19092, "broker_port_base": 19100,
         "advertised_host": "127.0.0.1"}
    ],
}  # fmt: skip


def _store(tmp_path: Path) -> PolicyStore:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "model.conf").write_text(MODEL_CONF)
    (policies / "policy.csv").write_text("")
    return PolicyStore(policies)


def test_admin_api_changes_are_recorded_as_the_kafka_principal(tmp_path: Path) -> None:
    key = tmp_path / "audit.key"
    write_new_key(key)
    policies, quotas = _store(tmp_path), FileQuotaStore(tmp_path / "quotas.json")
    config = AuditConfig(trail=tmp_path / "audit" / "audit.jsonl", key_file=key)
    trail = attach_audit(config, policies=policies, quotas=quotas)
    assert trail is not None and trail.keyed
    policies.add([rule("p, User:app, TOPIC, LITERAL, t, READ, *, allow")], actor="User:admin")
    policies.remove(AclFilter(principal="User:app"), actor="User:admin")
    quotas.set_values(Target(TargetType.TENANT, "acme"), {"requests": 5.0}, "User:ops")
    entries = list(trail.entries())
    assert [(e["actor"], e["action"]) for e in entries] == [
        ("kafka:User:admin", "policy.add"),
        ("kafka:User:admin", "policy.remove"),
        ("kafka:User:ops", "quota.set"),
    ]
    assert AuditTrail.open(config.trail, key).verify().ok


def test_no_audit_section_is_logged_and_a_bad_key_stops_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kgw.audit"):
        assert attach_audit(None, policies=_store(tmp_path)) is None
    assert any(getattr(r, "event", "") == "audit_off" for r in caplog.records)
    missing = AuditConfig(trail=tmp_path / "a.jsonl", key_file=tmp_path / "nope.key")
    with pytest.raises(AuditError, match="cannot read the audit key file"):
        attach_audit(missing)


def test_the_audit_section_is_validated() -> None:
    config = parse_config({**BASE, "audit": {"trail": "audit/audit.jsonl"}})
    assert config.audit is not None and config.audit.key_file is None
    with pytest.raises(ConfigError, match=r"audit\.trail"):
        parse_config({**BASE, "audit": {"key_file": "k"}})
    with pytest.raises(ConfigError, match=r"audit\.keyfile"):
        parse_config({**BASE, "audit": {"trail": "t", "keyfile": "k"}})


def test_scrub_removes_secrets_at_any_depth_and_actors_are_prefixed_once() -> None:
    record = {"key_id": "ak_1", "secret_hash": "h", "nested": [{"Salt": "s", "iterations": 4096}]}
    assert scrub(record) == {"key_id": "ak_1", "nested": [{"iterations": 4096}]}
    assert kafka_actor("User:alice") == "kafka:User:alice"
    assert kafka_actor("kafka:User:alice") == "kafka:User:alice"
