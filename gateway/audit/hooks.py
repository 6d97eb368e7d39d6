"""Adapters that turn other components' change notices into audit entries.

Each store calls its hooks after a change is written: ``PolicyStore`` with a
``PolicyChange``, ``QuotaStore`` and ``CredentialStore`` with
``(actor, action, target, before, after)``. The adapters here name the action
(``policy.add``, ``quota.set``, ``plan.assign``, ``apikey.create`` …), map the
actor (the gateway prefixes Kafka principals with ``kafka:``) and strip anything
secret from ``before``/``after`` before it reaches the trail. Certificates are
recorded by what identifies them: subject, serial, fingerprint, validity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..authz.model import AclRule
from ..authz.policyfile import Membership
from ..authz.store import PolicyChange, PolicyStore

if TYPE_CHECKING:
    from cryptography import x509

    from ..credentials.store import CredentialStore
    from ..quotas.store import QuotaStore

ActorMap = Callable[[str], str]
StoreHook = Callable[[str, str, str, Any, Any], None]
# Never recorded, at any depth: what would let someone authenticate or decrypt.
SECRET_FIELDS = frozenset(
    {
        "secret",
        "secret_hash",
        "password",
        "salt",
        "stored_key",
        "server_key",
        "private_key",
        "key_pem",
        "passphrase",
    }
)


class Sink(Protocol):
    """Where entries go: an ``AuditTrail``, or the CLI's ``ChangeRecorder``."""

    def append(
        self,
        actor: str,
        action: str,
        target: str,
        before: Any = None,
        after: Any = None,
        *,
        at: float | None = None,
    ) -> Any: ...


def same_actor(actor: str) -> str:
    return actor


def kafka_actor(principal: str) -> str:
    """The actor of a change made through the Kafka admin APIs: ``kafka:User:alice``."""
    return principal if principal.startswith("kafka:") else f"kafka:{principal}"


def scrub(value: Any) -> Any:
    """``value`` without any field named in ``SECRET_FIELDS`` (at any depth)."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if str(k).lower() not in SECRET_FIELDS}
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    return value


# -- policies ---------------------------------------------------------------------------


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


def policy_change_hook(
    trail: Sink, target: str, actor: ActorMap = same_actor
) -> Callable[[PolicyChange], None]:
    """A ``PolicyStore`` hook appending each change as ``policy.<action>`` on ``target``."""

    def hook(change: PolicyChange) -> None:
        before, after = policy_change_entry(change)
        trail.append(
            actor(change.actor), f"policy.{change.action}", target, before, after, at=change.at
        )

    return hook


def audit_policy_store(store: PolicyStore, trail: Sink, actor: ActorMap = same_actor) -> None:
    """Record every change ``store`` writes in ``trail`` (target: the policy file's path)."""
    store.add_hook(policy_change_hook(trail, str(store.policy_path), actor))


# -- quotas and plans -------------------------------------------------------------------


def quota_action(action: str) -> str:
    """``quota_set`` → ``quota.set``, ``plan_assign`` → ``plan.assign``."""
    return action.replace("_", ".", 1) if "." not in action else action


def quota_change_hook(trail: Sink, actor: ActorMap = same_actor) -> StoreHook:
    """A ``QuotaStore`` hook: target ``quotas/<target>``, ``plans/<name>``, ``tenants/<t>``."""

    def hook(who: str, action: str, target: str, before: Any, after: Any) -> None:
        trail.append(actor(who), quota_action(action), target, scrub(before), scrub(after))

    return hook


def audit_quota_store(store: QuotaStore, trail: Sink, actor: ActorMap = same_actor) -> None:
    store.add_hook(quota_change_hook(trail, actor))


# -- credentials ------------------------------------------------------------------------


def credential_change_hook(trail: Sink, actor: ActorMap = same_actor) -> StoreHook:
    """A ``CredentialStore`` hook: key ids, principals, iteration counts; never a secret."""

    def hook(who: str, action: str, target: str, before: Any, after: Any) -> None:
        trail.append(actor(who), action, target, scrub(before), scrub(after))

    return hook


def audit_credential_store(
    store: CredentialStore, trail: Sink, actor: ActorMap = same_actor
) -> None:
    store.add_hook(credential_change_hook(trail, actor))


# -- certificates -----------------------------------------------------------------------


def certificate_json(cert: x509.Certificate) -> dict[str, Any]:
    """What identifies a certificate (never its key): subject, serial, fingerprint, validity."""
    from cryptography.hazmat.primitives import hashes

    return {
        "subject": cert.subject.rfc4514_string(),
        "issuer": cert.issuer.rfc4514_string(),
        "serial": f"{cert.serial_number:x}",
        "sha256_fingerprint": cert.fingerprint(hashes.SHA256()).hex(":").upper(),
        "not_before": cert.not_valid_before_utc.isoformat(),
        "not_after": cert.not_valid_after_utc.isoformat(),
    }
