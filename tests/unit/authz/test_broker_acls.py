"""The policy as broker ACLs for the per-tenant upstream principals (decision 0026)."""

from __future__ import annotations

from gateway.authz.broker_acls import (
    desired_acls,
    diff,
    managed,
    tenant_names,
    tenant_of,
)
from gateway.authz.model import AclRule, Operation, PatternType, Permission, ResourceType
from gateway.authz.policyfile import Membership
from gateway.tenants.model import namespace_rules

T, G = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def rule(
    who: str,
    name: str,
    op: Operation,
    perm: Permission = ALLOW,
    host: str = "*",
    rtype: ResourceType = T,
    pattern: PatternType = PatternType.LITERAL,
) -> AclRule:
    return AclRule(who, rtype, pattern, name, op, host, perm)


RULES = [
    *namespace_rules("a", "a."),
    *namespace_rules("b", "b."),
    rule("Role:a-readers", "b.shared", Operation.READ),  # a narrower role, cross-tenant grant
    rule("User:a.app", "a.audit", Operation.DELETE, DENY),
    rule("User:a.app", "a.secret", Operation.READ, DENY, host="10.0.0.1"),
    rule("User:a.app", "a.lan", Operation.WRITE, host="10.0.0.0/8"),
    rule("User:*", "public", Operation.READ),
    rule("User:alice", "ops", Operation.ALL),  # no tenant's
]
MEMBERS = [
    Membership("User:a.app", "Role:tenant-a"),
    Membership("User:a.app", "Role:a-readers"),
    Membership("User:b.app", "Role:tenant-b"),
]
PRINCIPALS = {"a": "User:kgw-t-a", "b": "User:kgw-t-b"}


def acl(
    who: str,
    name: str,
    op: Operation,
    perm: Permission = ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> AclRule:
    return rule(who, name, op, perm, pattern=pattern)


def test_tenants_come_from_their_roles() -> None:
    assert tenant_names(RULES, MEMBERS) == {"a", "b"}
    assert tenant_of("User:a.app", RULES, MEMBERS) == "a"
    assert tenant_of("User:b.app", RULES, MEMBERS) == "b"
    assert tenant_of("User:alice", RULES, MEMBERS) is None


def test_a_principal_in_two_tenants_belongs_to_none() -> None:
    both = [*MEMBERS, Membership("User:a.app", "Role:tenant-b")]
    assert tenant_of("User:a.app", RULES, both) is None


def test_each_tenant_gets_its_namespace_and_its_principals_rules() -> None:
    wanted = desired_acls(RULES, MEMBERS, PRINCIPALS)
    ka, kb = "User:kgw-t-a", "User:kgw-t-b"
    prefixed = PatternType.PREFIXED
    assert acl(ka, "a.", Operation.ALL, pattern=prefixed) in wanted
    assert acl(kb, "b.", Operation.ALL, pattern=prefixed) in wanted
    assert acl(ka, "b.shared", Operation.READ) in wanted  # through a role of a's principal
    assert acl(kb, "b.shared", Operation.READ) not in wanted
    assert acl(ka, "a.audit", Operation.DELETE, DENY) in wanted  # deny mirrored as deny
    assert acl(ka, "a.lan", Operation.WRITE) in wanted  # host-restricted allow: any host
    assert not any(a.name == "a.secret" for a in wanted)  # host-restricted deny: gateway only
    assert (
        acl(ka, "public", Operation.READ) in wanted and acl(kb, "public", Operation.READ) in wanted
    )
    assert not any(a.name == "ops" for a in wanted)
    assert all(a.principal in (ka, kb) and a.host == "*" for a in wanted)
    assert not any(a.name.startswith("b.") and a.principal == ka and a.pattern_type is prefixed
                   for a in wanted)  # fmt: skip


def test_blocked_tenants_get_nothing() -> None:
    wanted = desired_acls(RULES, MEMBERS, PRINCIPALS, blocked=frozenset({"b"}))
    assert wanted and all(a.principal == "User:kgw-t-a" for a in wanted)


def test_diff_and_ownership() -> None:
    mine = acl("User:kgw-t-a", "a.", Operation.ALL, pattern=PatternType.PREFIXED)
    stale = acl("User:kgw-t-a", "old", Operation.READ)
    theirs = acl("User:operator", "x", Operation.READ)
    actual = managed([mine, stale, theirs], "kgw-t-")
    assert actual == {mine, stale}
    change = diff(frozenset({mine, acl("User:kgw-t-b", "b.", Operation.READ)}), actual)
    assert change.delete == {stale} and len(change.create) == 1 and not change.empty
    assert diff(actual, actual).empty
