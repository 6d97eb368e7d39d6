"""The casbin policy as Kafka ACLs for the per-tenant upstream principals. No I/O.

Each tenant (a role ``Role:tenant-<name>`` in the policy, decision 0016) has one upstream
principal on the brokers (``User:kgw-t-<name>``, ``upstream/tenant_identity.py``). The
brokers grant that principal the union of what the policy grants the tenant's
principals, so they refuse whatever no principal of the tenant may do, whatever the
gateway decided:

* the tenant's principals are the (transitive) members of its role, and every principal
  named ``User:<name>.<anything>`` (the naming of the keys ``kgw tenant`` issues);
* its subjects are those principals, every role they are members of (transitively),
  the tenant role itself and ``User:*``; every rule whose principal is one of them is
  mirrored with the upstream principal in its place, ALLOW and DENY alike;
* the brokers see the gateway's address, not the client's: a host-restricted ALLOW is
  mirrored for every host (the gateway still checks the host), a host-restricted DENY
  is not mirrored (the gateway enforces it alone).

The sync owns exactly the broker ACLs whose principal starts with ``User:<user_prefix>``;
others (an operator's own) are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.create_acls.v3.request import AclCreation
from kio.schema.delete_acls.v3.request import DeleteAclsFilter
from kio.static.primitive import i8

from .model import AclRule, Operation, PatternType, Permission, ResourceType
from .policyfile import Membership

TENANT_ROLE = "Role:tenant-"
ANY_HOST = "*"
EVERYONE = "User:*"


def tenant_names(rules: Iterable[AclRule], members: Iterable[Membership]) -> set[str]:
    """Every tenant the policy knows: the names of its ``Role:tenant-<name>`` roles."""
    seen = {r.principal for r in rules} | {m.role for m in members}
    return {p[len(TENANT_ROLE) :] for p in seen if p.startswith(TENANT_ROLE) and len(p) > 12}


def _members_of(members: Iterable[Membership]) -> dict[str, set[str]]:
    down: dict[str, set[str]] = {}
    for m in members:
        down.setdefault(m.role, set()).add(m.member)
    return down


def _roles_of(members: Iterable[Membership]) -> dict[str, set[str]]:
    up: dict[str, set[str]] = {}
    for m in members:
        up.setdefault(m.member, set()).add(m.role)
    return up


def _closure(start: Iterable[str], edges: Mapping[str, set[str]]) -> set[str]:
    found, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def tenant_principals(
    tenant: str, rules: Iterable[AclRule], members: Iterable[Membership]
) -> set[str]:
    """The principals (and roles) that belong to ``tenant``."""
    members = list(members)
    role = f"{TENANT_ROLE}{tenant}"
    named = f"User:{tenant}."
    everyone = {r.principal for r in rules} | {m.member for m in members}
    by_name = {p for p in everyone if p.startswith(named)}
    return _closure([role], _members_of(members)) | by_name


def tenant_subjects(
    tenant: str, rules: Iterable[AclRule], members: Iterable[Membership]
) -> set[str]:
    """Every rule subject whose rules apply to some principal of ``tenant``."""
    rules, members = list(rules), list(members)
    own = tenant_principals(tenant, rules, members)
    return _closure(own, _roles_of(members)) | {EVERYONE}


def tenant_of(
    principal: str, rules: Iterable[AclRule], members: Iterable[Membership]
) -> str | None:
    """The one tenant ``principal`` belongs to by the policy; ``None`` if none or several."""
    rules, members = list(rules), list(members)
    found = {
        t for t in tenant_names(rules, members) if principal in tenant_principals(t, rules, members)
    }
    return found.pop() if len(found) == 1 else None


def mirrored(rule: AclRule, principal: str) -> AclRule | None:
    """``rule`` for the broker, as ``principal``; ``None`` if the gateway alone enforces it."""
    if rule.host != ANY_HOST and rule.permission is Permission.DENY:
        return None
    return replace(rule, principal=principal, host=ANY_HOST)


def desired_acls(
    rules: Iterable[AclRule],
    members: Iterable[Membership],
    principal_of: Mapping[str, str],
    blocked: frozenset[str] = frozenset(),
) -> frozenset[AclRule]:
    """The broker ACLs of every tenant in ``principal_of`` (tenant → upstream principal)."""
    rules, members = list(rules), list(members)
    wanted: set[AclRule] = set()
    for tenant, principal in principal_of.items():
        if tenant in blocked:
            continue  # suspended or deleted: no rights on the brokers either
        subjects = tenant_subjects(tenant, rules, members)
        for rule in rules:
            if rule.principal in subjects:
                acl = mirrored(rule, principal)
                if acl is not None:
                    wanted.add(acl)
    return frozenset(wanted)


@dataclass(frozen=True, slots=True)
class AclDiff:
    create: frozenset[AclRule]
    delete: frozenset[AclRule]

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def diff(desired: frozenset[AclRule], actual: frozenset[AclRule]) -> AclDiff:
    return AclDiff(create=desired - actual, delete=actual - desired)


def managed(acls: Iterable[AclRule], user_prefix: str) -> frozenset[AclRule]:
    """The ACLs the sync owns: those of the upstream principals."""
    head = f"User:{user_prefix}"
    return frozenset(a for a in acls if a.principal.startswith(head))


def creation(rule: AclRule) -> AclCreation:
    return AclCreation(
        resource_type=i8(rule.resource_type),
        resource_name=rule.name,
        resource_pattern_type=i8(rule.pattern_type),
        principal=rule.principal,
        host=rule.host,
        operation=i8(rule.operation),
        permission_type=i8(rule.permission),
    )


def deletion(rule: AclRule) -> DeleteAclsFilter:
    """A filter that matches exactly ``rule``."""
    return DeleteAclsFilter(
        resource_type_filter=i8(rule.resource_type),
        resource_name_filter=rule.name,
        pattern_type_filter=i8(rule.pattern_type),
        principal_filter=rule.principal,
        host_filter=rule.host,
        operation=i8(rule.operation),
        permission_type=i8(rule.permission),
    )


def described(resources: Iterable[Any]) -> frozenset[AclRule]:
    """DescribeAcls' resources as rules; bindings with codes the model lacks are left out."""
    found: set[AclRule] = set()
    for res in resources:
        for acl in res.acls:
            try:
                found.add(
                    AclRule(
                        principal=acl.principal,
                        resource_type=ResourceType(int(res.resource_type)),
                        pattern_type=PatternType(int(res.pattern_type)),
                        name=res.resource_name,
                        operation=Operation(int(acl.operation)),
                        host=acl.host,
                        permission=Permission(int(acl.permission_type)),
                    )
                )
            except ValueError:
                continue
    return frozenset(found)
