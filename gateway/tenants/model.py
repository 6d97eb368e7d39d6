"""A tenant: its name, namespace, role and lifecycle state, with no I/O.

The namespace is one name prefix shared by the tenant's topics, consumer groups
and transactional ids; it is the quotas' ``topic_prefix`` (``{tenant}.`` by
default), so the licence checks and the policies agree on what the tenant owns.
Tenant names are lower-case letters, digits and ``-`` (no ``.`` or ``_``), so no
tenant's prefix can be the start of another's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..authz.model import (
    CLUSTER_NAME,
    AclFilter,
    AclRule,
    Operation,
    PatternFilter,
    PatternType,
    Permission,
    ResourceType,
)
from ..credentials.model import TENANT_RE
from ..quotas.licence import tenant_prefix

TenantState = Literal["active", "suspended", "deleted"]
# how the tenant's clients name things: with the prefix, or plain (gateway/namespaces)
NamespaceMode = Literal["prefixed", "transparent"]
NAMESPACE_MODES: tuple[NamespaceMode, ...] = ("prefixed", "transparent")
STATES: tuple[TenantState, ...] = ("active", "suspended", "deleted")
BLOCKED_STATES = frozenset({"suspended", "deleted"})
NAME_RE = TENANT_RE
ANY_HOST = "*"


class TenantError(Exception):
    """A tenant operation that cannot be carried out; the message says why."""


class CorruptTenant(TenantError):
    """A stored tenant record cannot be read."""


def check_name(name: str, prefix_format: str = "{tenant}.") -> str:
    """``name`` if it is a usable tenant name under ``prefix_format``, else ``TenantError``."""
    if not NAME_RE.fullmatch(name):
        raise TenantError(
            f"tenant name {name[:80]!r}: 1-48 of a-z, 0-9 and '-', starting and ending "
            "with a letter or digit"
        )
    separator = prefix_format.replace("{tenant}", "")
    if any(char in name for char in separator):
        raise TenantError(f"tenant name {name!r} must not contain the separator {separator!r}")
    return name


def namespace(name: str, prefix_format: str = "{tenant}.") -> str:
    """The prefix of the tenant's topics, groups and transactional ids."""
    return tenant_prefix(name, prefix_format)


def role_for(name: str) -> str:
    return f"Role:tenant-{name}"


def principal_for(name: str) -> str:
    """The principal of the tenant's first API key (and client certificate)."""
    return f"User:{name}.app"


def overlapping(prefix: str, others: dict[str, str]) -> str | None:
    """The tenant among ``others`` (name → prefix) whose prefix overlaps ``prefix``."""
    for other, other_prefix in sorted(others.items()):
        if other_prefix.startswith(prefix) or prefix.startswith(other_prefix):
            return other
    return None


def namespace_rules(name: str, prefix: str) -> list[AclRule]:
    """The role's grants: everything on PREFIXED resources in the namespace, nothing else.

    ``IDEMPOTENT_WRITE`` on the cluster is the one cluster-level right: every current
    client enables idempotence by default, and it gives access to no one's data.
    """
    role = role_for(name)

    def allow(rtype: ResourceType, pattern: PatternType, res: str, op: Operation) -> AclRule:
        return AclRule(role, rtype, pattern, res, op, ANY_HOST, Permission.ALLOW)

    return [
        allow(ResourceType.TOPIC, PatternType.PREFIXED, prefix, Operation.ALL),
        allow(ResourceType.GROUP, PatternType.PREFIXED, prefix, Operation.ALL),
        allow(ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, prefix, Operation.ALL),
        allow(ResourceType.CLUSTER, PatternType.LITERAL, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE),
    ]


def role_filter(name: str) -> AclFilter:
    """Selects every rule whose principal is the tenant's role."""
    return AclFilter(principal=role_for(name), pattern_type=PatternFilter.ANY)


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    plan: str
    prefix: str
    state: TenantState = "active"
    api_keys: tuple[str, ...] = ()
    certificates: tuple[str, ...] = ()
    created_at: float = field(default_factory=time.time)
    changed_at: float = field(default_factory=time.time)
    namespace: NamespaceMode = "prefixed"

    @property
    def transparent(self) -> bool:
        return self.namespace == "transparent"

    @property
    def blocked(self) -> bool:
        return self.state in BLOCKED_STATES

    def with_state(self, state: TenantState, at: float | None = None) -> Tenant:
        return replace(self, state=state, changed_at=time.time() if at is None else at)

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "plan": self.plan,
            "prefix": self.prefix,
            "state": self.state,
            "api_keys": list(self.api_keys),
            "certificates": list(self.certificates),
            "created_at": self.created_at,
            "changed_at": self.changed_at,
            "namespace": self.namespace,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Tenant:
        try:
            state = record["state"]
            if state not in STATES:
                raise ValueError(state)
            mode = record.get("namespace", "prefixed")  # absent in older records
            if mode not in NAMESPACE_MODES:
                raise ValueError(mode)
            return cls(
                name=str(record["name"]),
                plan=str(record["plan"]),
                prefix=str(record["prefix"]),
                state=state,
                api_keys=tuple(str(k) for k in record.get("api_keys", ())),
                certificates=tuple(str(c) for c in record.get("certificates", ())),
                created_at=float(record["created_at"]),
                changed_at=float(record.get("changed_at", record["created_at"])),
                namespace=mode,
            )
        except (KeyError, TypeError, ValueError):
            raise CorruptTenant("unreadable tenant record in the tenant store") from None
