"""Random policies and requests: the engine against Kafka's rules written out plainly,
and against plain casbin over the same model."""

from __future__ import annotations

import ipaddress
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.authz.casbin_model import MODEL_CONF, reference_enforcer
from gateway.authz.engine import Authorizer
from gateway.authz.model import (
    AclRule,
    Decision,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from gateway.authz.policyfile import Membership, format_membership, format_rule
from gateway.authz.store import PolicyStore

from .conftest import write_policy

RULE_PRINCIPALS = ["User:a", "User:b", "Role:x", "Role:y", "Role:z", "User:*"]
REQUEST_PRINCIPALS = ["User:a", "User:b", "User:c", "User:root"]
ORDER = ["User:a", "User:b", "User:c", "Role:x", "Role:y", "Role:z"]  # members before roles
NAMES = ["t", "t1", "tx", "x"]
HOSTS = ["*", "10.0.0.1", "10.0.0.0/24", "10.1.0.0/16", "::1", "2001:db8::/32"]
CLIENTS = ["10.0.0.1", "10.0.0.9", "10.1.2.3", "::1", "2001:db8::5", "192.168.1.1"]
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
# the operations where implication matters, so that random policies exercise it
OPS = [
    Operation.ALL,
    Operation.READ,
    Operation.WRITE,
    Operation.DESCRIBE,
    Operation.ALTER_CONFIGS,
    Operation.DESCRIBE_CONFIGS,
    Operation.CREATE,
]

rules = st.builds(
    AclRule,
    principal=st.sampled_from(RULE_PRINCIPALS),
    resource_type=st.sampled_from(TYPES),
    pattern_type=st.sampled_from(list(PatternType)),
    name=st.sampled_from([*NAMES, "*"]),
    operation=st.sampled_from(OPS),
    host=st.sampled_from(HOSTS),
    permission=st.sampled_from(list(Permission)),
)
members = (
    st.tuples(st.sampled_from(range(len(ORDER))), st.sampled_from(range(3, len(ORDER))))
    .filter(lambda pair: pair[0] < pair[1])
    .map(lambda pair: Membership(ORDER[pair[0]], ORDER[pair[1]]))
)
requests = st.tuples(
    st.sampled_from(REQUEST_PRINCIPALS),
    st.sampled_from(CLIENTS),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES),
    st.sampled_from(OPS[1:]),
)


def _subjects(principal: str, memberships: list[Membership]) -> set[str]:
    found = {principal, "User:*"}
    changed = True
    while changed:
        changed = False
        for m in memberships:
            if m.member in found and m.role not in found:
                found.add(m.role)
                changed = True
    return found


def _applies(rule: AclRule, subjects: set[str], host: str, rtype: ResourceType, name: str) -> bool:
    if rule.resource_type != rtype or rule.principal not in subjects:
        return False
    if rule.pattern_type is PatternType.LITERAL:
        name_ok = rule.name in (name, "*")
    else:
        name_ok = name.startswith(rule.name)
    host_ok = rule.host == "*" or ipaddress.ip_address(host) in ipaddress.ip_network(rule.host)
    return name_ok and host_ok


def _allows(rule_op: Operation, op: Operation) -> bool:
    describe = {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    return (
        rule_op in (Operation.ALL, op)
        or (op is Operation.DESCRIBE and rule_op in describe)
        or (op is Operation.DESCRIBE_CONFIGS and rule_op is Operation.ALTER_CONFIGS)
    )


def kafka(
    policy: list[AclRule],
    memberships: list[Membership],
    principal: str,
    host: str,
    rtype: ResourceType,
    name: str,
    op: Operation,
) -> bool:
    """StandardAuthorizer's decision, written out plainly (super user: User:root)."""
    if principal == "User:root":
        return True
    subjects = _subjects(principal, memberships)
    matching = [r for r in policy if _applies(r, subjects, host, rtype, name)]
    if any(
        r.permission is Permission.DENY and r.operation in (Operation.ALL, op) for r in matching
    ):
        return False
    return any(r.permission is Permission.ALLOW and _allows(r.operation, op) for r in matching)


def _check_rule(
    decision: Decision,
    policy: list[AclRule],
    memberships: list[Membership],
    request: tuple[str, str, ResourceType, str, Operation],
) -> None:
    principal, host, rtype, name, op = request
    if principal == "User:root":
        assert decision.rule == "super user"
        return
    if decision.acl is None:
        assert not decision.allowed
        return
    acl = decision.acl
    assert acl in policy
    assert _applies(acl, _subjects(principal, memberships), host, rtype, name)
    if decision.allowed:
        assert acl.permission is Permission.ALLOW and _allows(acl.operation, op)
    else:
        assert acl.permission is Permission.DENY and acl.operation in (Operation.ALL, op)


@settings(max_examples=300, deadline=None)
@given(
    policy=st.lists(rules, max_size=16),
    memberships=st.lists(members, max_size=4),
    asked=st.lists(requests, min_size=1, max_size=25),
)
def test_engine_matches_kafka_and_plain_casbin(
    policy: list[AclRule],
    memberships: list[Membership],
    asked: list[tuple[str, str, ResourceType, str, Operation]],
) -> None:
    valid = policy
    text = "".join(f"{format_rule(r)}\n" for r in valid)
    text += "".join(f"{format_membership(m)}\n" for m in memberships)
    with tempfile.TemporaryDirectory() as tmp:
        directory = write_policy(Path(tmp), text)
        authorizer = Authorizer(PolicyStore(directory), super_users=["User:root"])
        plain = reference_enforcer(MODEL_CONF, valid, memberships)
        for request in asked:
            principal, host, rtype, name, op = request
            decision = authorizer.authorize(*request)
            assert decision.allowed is kafka(valid, memberships, *request), (request, decision)
            if principal != "User:root":
                assert plain.enforce(principal, host, rtype.name, name, op.name) is decision.allowed
            _check_rule(decision, valid, memberships, request)
