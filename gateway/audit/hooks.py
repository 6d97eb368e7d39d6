"""Adapters that turn other components' change notices into audit entries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..authz.model import AclRule
from ..authz.policyfile import Membership
from ..authz.store import PolicyChange, PolicyStore
from .trail import AuditTrail


def rule_json(rule: AclRule) -> dict[str, str]:
    return {
        "principal": rule.principal,
        "resource_type": rule.resource_type.name,
        "pattern_type": rule.pattern_type.name,
        "name": rule.name,
        "operation": rule.operation.name,
        "host": rule.host,
        "permission": rule.permission.name,
    }


def _members(members: tuple[Membership, ...]) -> list[dict[str, str]]:
    return [{"member": m.member, "role": m.role} for m in members]


def policy_change_entry(change: PolicyChange) -> tuple[dict[str, Any], dict[str, Any]]:
    """``before`` and ``after`` for one policy change: the file digests, what went, what came."""
    before = {
        "policy_sha256": change.before_sha256,
        "rules": [rule_json(rule) for rule in change.removed],
        "memberships": _members(change.members_removed),
    }
    after = {
        "policy_sha256": change.after_sha256,
        "rules": [rule_json(rule) for rule in change.added],
        "memberships": _members(change.members_added),
    }
    return before, after


def policy_change_hook(trail: AuditTrail, target: str) -> Callable[[PolicyChange], None]:
    """A ``PolicyStore`` hook appending each change as ``policy.<action>`` on ``target``."""

    def hook(change: PolicyChange) -> None:
        before, after = policy_change_entry(change)
        trail.append(change.actor, f"policy.{change.action}", target, before, after, at=change.at)

    return hook


def audit_policy_store(store: PolicyStore, trail: AuditTrail) -> None:
    """Record every change ``store`` writes in ``trail`` (target: the policy file's path)."""
    store.add_hook(policy_change_hook(trail, str(store.policy_path)))
