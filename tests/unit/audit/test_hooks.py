"""Policy changes reach the audit trail through the store's hook."""

from __future__ import annotations

from pathlib import Path

from gateway.audit import AuditTrail, audit_policy_store
from gateway.authz.casbin_model import MODEL_CONF
from gateway.authz.model import AclFilter, Operation, ResourceType
from gateway.authz.store import PolicyStore

from ..authz.conftest import rule


def test_every_policy_change_is_recorded_with_before_and_after(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "model.conf").write_text(MODEL_CONF)
    (policies / "policy.csv").write_text("")
    store = PolicyStore(policies)
    trail = AuditTrail(tmp_path / "audit" / "audit.jsonl")
    audit_policy_store(store, trail)

    read = rule("p, User:alice, TOPIC, LITERAL, orders, READ, *, allow")
    store.add([read], actor="cli:admin")
    store.add_role_member("User:bob", "Role:readers", actor="kafka:User:ops")
    store.remove(AclFilter(principal="User:alice", resource_type=ResourceType.TOPIC), "cli:admin")

    entries = list(trail.entries())
    assert [(e["actor"], e["action"]) for e in entries] == [
        ("cli:admin", "policy.add"),
        ("kafka:User:ops", "policy.add_role_member"),
        ("cli:admin", "policy.remove"),
    ]
    first, second, third = entries
    assert first["target"] == str(policies / "policy.csv")
    assert first["after"]["rules"] == [
        {
            "principal": "User:alice",
            "resource_type": "TOPIC",
            "pattern_type": "LITERAL",
            "name": "orders",
            "operation": Operation.READ.name,
            "host": "*",
            "permission": "ALLOW",
        }
    ]
    assert first["before"]["policy_sha256"] != first["after"]["policy_sha256"]
    assert second["before"]["policy_sha256"] == first["after"]["policy_sha256"]
    assert second["after"]["memberships"] == [{"member": "User:bob", "role": "Role:readers"}]
    assert third["before"]["rules"][0]["principal"] == "User:alice"
    assert third["after"]["rules"] == []
    assert trail.verify().ok
