"""The ACL vocabulary: Kafka's filter semantics, wire codes, rule checks, the file format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.authz.model import (
    AclFilter,
    AclRule,
    InvalidRuleError,
    Operation,
    PatternFilter,
    PatternType,
    Permission,
    ResourceType,
    granted_operations,
    rule_problems,
)
from gateway.authz.policyfile import (
    LineError,
    Membership,
    format_membership,
    format_rule,
    parse_line,
    parse_policy,
    split_fields,
)

from .conftest import rule

T, G = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(name: str, pattern: PatternType = LIT, rtype: ResourceType = T) -> AclRule:
    return AclRule("User:a", rtype, pattern, name, Operation.READ, "*", Permission.ALLOW)


def test_enum_values_are_kafkas_wire_codes() -> None:
    assert [t.value for t in ResourceType] == [2, 3, 4, 5, 6]
    assert (PatternType.LITERAL, PatternType.PREFIXED) == (3, 4)
    assert (PatternFilter.ANY, PatternFilter.MATCH) == (1, 2)
    assert Operation.ALL == 2 and Operation.DESCRIBE_TOKENS == 14
    assert (Permission.DENY, Permission.ALLOW) == (2, 3)


@pytest.mark.parametrize(
    ("flt", "rule_", "matches"),
    [
        # resource type
        (AclFilter(), acl("t"), True),
        (AclFilter(resource_type=G), acl("t"), False),
        # exact pattern types
        (AclFilter(name="t", pattern_type=PatternType.LITERAL), acl("t"), True),
        (AclFilter(name="t", pattern_type=PatternType.LITERAL), acl("t", PRE), False),
        (AclFilter(name="t", pattern_type=PatternFilter.PREFIXED), acl("t", PRE), True),
        (AclFilter(pattern_type=PatternFilter.PREFIXED), acl("x"), False),
        # ANY with a name: that exact name, any pattern type, not the wildcard
        (AclFilter(name="t", pattern_type=PatternFilter.ANY), acl("t", PRE), True),
        (AclFilter(name="t", pattern_type=PatternFilter.ANY), acl("*"), False),
        (AclFilter(name="t1", pattern_type=PatternFilter.ANY), acl("t", PRE), False),
        # MATCH: every rule that applies to a resource of that name
        (AclFilter(name="t1", pattern_type=PatternFilter.MATCH), acl("t1"), True),
        (AclFilter(name="t1", pattern_type=PatternFilter.MATCH), acl("*"), True),
        (AclFilter(name="t1", pattern_type=PatternFilter.MATCH), acl("t", PRE), True),
        (AclFilter(name="t1", pattern_type=PatternFilter.MATCH), acl("t12", PRE), False),
        (AclFilter(name="t1", pattern_type=PatternFilter.MATCH), acl("t"), False),
        (AclFilter(pattern_type=PatternFilter.MATCH), acl("anything", PRE), True),
        # entry fields: exact or any
        (AclFilter(principal="User:a"), acl("t"), True),
        (AclFilter(principal="User:*"), acl("t"), False),
        (AclFilter(host="*"), acl("t"), True),
        (AclFilter(host="10.0.0.1"), acl("t"), False),
        (AclFilter(operation=Operation.READ), acl("t"), True),
        (AclFilter(operation=Operation.ALL), acl("t"), False),
        (AclFilter(permission=Permission.DENY), acl("t"), False),
    ],
)
def test_filters_follow_kafkas_acl_binding_filter(
    flt: AclFilter, rule_: AclRule, matches: bool
) -> None:
    assert flt.matches(rule_) is matches


def test_rules_from_create_acls_codes() -> None:
    made = AclRule.from_kafka(2, "orders", 4, "User:alice", "10.0.0.0/8", 4, 3)
    assert made == rule("p, User:alice, TOPIC, PREFIXED, orders, WRITE, 10.0.0.0/8, allow")
    cluster = AclRule.from_kafka(4, "kafka-cluster", 3, "User:alice", "*", 7, 2)
    assert cluster.permission is Permission.DENY


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1, "t", 3, "User:a", "*", 3, 3), "ResourceType"),  # ANY resource type
        ((2, "t", 1, "User:a", "*", 3, 3), "PatternType"),  # ANY pattern
        ((2, "t", 2, "User:a", "*", 3, 3), "PatternType"),  # MATCH pattern
        ((2, "t", 3, "User:a", "*", 1, 3), "Operation"),  # ANY operation
        ((2, "t", 3, "User:a", "*", 3, 1), "Permission"),  # ANY permission
        ((2, "", 3, "User:a", "*", 3, 3), "must not be empty"),
        ((2, "t", 3, "alice", "*", 3, 3), "Type:name"),
        ((2, "t", 3, "User:a", "host", 3, 3), "CIDR"),
        ((4, "my-cluster", 3, "User:a", "*", 7, 3), "kafka-cluster"),
    ],
)
def test_create_acls_codes_kafka_refuses(args: tuple[int, ...], message: str) -> None:
    rtype, name, pattern, principal, host, op, perm = args
    with pytest.raises(InvalidRuleError, match=message):
        AclRule.from_kafka(rtype, str(name), pattern, str(principal), str(host), op, perm)


def test_filters_from_describe_acls_codes() -> None:
    assert AclFilter.from_kafka(1, None, 1, None, None, 1, 1) == AclFilter()
    flt = AclFilter.from_kafka(2, "t", 2, "User:a", "*", 3, 3)
    assert flt == AclFilter(
        "User:a", T, PatternFilter.MATCH, "t", Operation.READ, "*", Permission.ALLOW
    )
    with pytest.raises(InvalidRuleError, match="resource type code 99"):
        AclFilter.from_kafka(99, None, 1, None, None, 1, 1)


def test_rule_problems_reject_control_characters() -> None:
    assert rule_problems(acl("a\nb"))
    assert rule_problems(acl("ok")) == []


def test_granted_operations() -> None:
    assert granted_operations(Operation.READ) == {Operation.READ, Operation.DESCRIBE}
    assert granted_operations(Operation.ALTER_CONFIGS) == {
        Operation.ALTER_CONFIGS,
        Operation.DESCRIBE_CONFIGS,
    }
    assert granted_operations(Operation.CREATE) == {Operation.CREATE}
    assert granted_operations(Operation.ALL) == set(Operation)


def test_rules_read_as_sentences() -> None:
    assert str(rule("p, User:a, TOPIC, PREFIXED, orders., WRITE, 10.0.0.0/8, deny")) == (
        "DENY User:a to WRITE on TOPIC prefixed 'orders.' from host 10.0.0.0/8"
    )


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        ("p, a, b", ["p", "a", "b"]),
        ("p,a,,b,", ["p", "a", "", "b", ""]),
        ('p, "a, b" , c', ["p", "a, b", "c"]),
        ('"say ""hi"""', ['say "hi"']),
        ('"  padded  ", x', ["  padded  ", "x"]),
    ],
)
def test_split_fields(line: str, fields: list[str]) -> None:
    assert split_fields(line) == fields


@pytest.mark.parametrize("line", ['"open', '"a"b, c', 'a"b, c'])
def test_split_fields_refuses_broken_quotes(line: str) -> None:
    with pytest.raises(LineError):
        split_fields(line)


names = st.text(alphabet=st.characters(min_codepoint=32, exclude_characters="\x7f"), min_size=1)


@given(name=names, principal_name=names, host=st.sampled_from(["*", "10.0.0.1", "::/0"]))
def test_any_name_round_trips_through_the_file(name: str, principal_name: str, host: str) -> None:
    principal = "User:" + principal_name.strip()
    if not principal_name.strip():
        principal = "User:x"
    original = AclRule(principal, G, PRE, name, Operation.DELETE, host, Permission.DENY)
    line = format_rule(original)
    assert parse_policy(line + "\n").rules == [(1, original)]
    membership = Membership(principal, "Role:" + name.replace("\n", ""))
    assert parse_line(format_membership(membership)) == membership


def test_comments_and_blank_lines_are_not_rules() -> None:
    assert parse_line("   # p, User:a, TOPIC, LITERAL, t, READ, *, allow") is None
    assert parse_line("   ") is None
