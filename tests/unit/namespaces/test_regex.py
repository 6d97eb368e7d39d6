"""KIP-848 regex subscriptions: the shared syntax (``gateway/saferegex.py``), the namespace's
confinement ``<prefix>(?:R)``, and authorization on the pattern's literal prefix."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from gateway import saferegex
from gateway.authz.model import Operation as Op
from gateway.authz.model import ResourceType as R
from gateway.enforcement import units
from gateway.namespaces.names import NameRefused, Namespace
from gateway.protocol import apis

NS = Namespace("acme", "acme.")
NAMES = ["acme.orders", "acme.payments", "acme.", "other.orders", "acmex.orders", "ACME.orders",
         "acme", "orders", "b.acme.orders", "acme.other.orders", "acme_orders"]  # fmt: skip

ACCEPTED = {
    ".*": ".*",
    "^orders.*$": "orders.*",
    "orders|payments": "orders|payments",
    "(ord|pay)[a-z]+": "(?:ord|pay)[a-z]+",
    "[a-z0-9._-]+": "[a-z0-9\\.\\_\\-]+",
    "[a\\-z]": "[a\\-z]",
    "x{2,3}?y{2}z{1,}": "x{2,3}?y{2}z+",
    "\\d\\w\\.": "\\d\\w\\.",
    ".*|other\\..*": ".*|other\\..*",  # confined: other.x inside the namespace only
    "(^a|^b)c$": "(?:a|b)c",
}
HOSTILE = [
    ")|(.*", "a)|(.*", "(.*", "\\Qx\\E", "\\Q).*|(\\E", "(?i)acme", "(?s).*", "(?x) . *",
    "(?<n>x)", "(?=x).*", "(?!x).*", "(?<=x).*", "a**", "a*+", "a++", "a{,3}", "a{2,1}",
    "x{1001}", "[[a]]", "[a&&b]", "[]a]", "[^]a]", "[", "[a", "a$b", "a^b", "(^a)*", "^*",
    "\\p{L}", "\\pL", "\\x41", "\\u0041", "\\0101", "\\b", "\\A.*", "\\z", "\\G", "\\k<n>",
    "\\s", "a\\", "é.*", "\uff41cme.*", "acme\u200b.*", "a b", "#", "\n", "a\x00",
    "(" * 40 + ")" * 40,
    "x" * 1001,
]  # fmt: skip


@pytest.mark.parametrize(("pattern", "expected"), ACCEPTED.items())
def test_accepted_patterns_are_re_emitted_canonically(pattern: str, expected: str) -> None:
    assert saferegex.canonical(pattern) == expected
    assert saferegex.canonical(expected) == expected  # a fixed point


@pytest.mark.parametrize("pattern", HOSTILE)
def test_hostile_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(saferegex.RegexRefused):
        saferegex.canonical(pattern)
    with pytest.raises(NameRefused):
        NS.regex_to_cluster(pattern)


@pytest.mark.parametrize("pattern", list(ACCEPTED))
def test_confined_patterns_match_only_inside_the_namespace(pattern: str) -> None:
    cluster = re.compile(NS.regex_to_cluster(pattern))
    tenant = re.compile(saferegex.canonical(pattern))
    for name in NAMES:
        inside = NS.to_tenant(name)
        expected = inside is not None and tenant.fullmatch(inside) is not None
        assert (cluster.fullmatch(name) is not None) == expected, name


def test_literal_prefix_is_what_every_match_starts_with() -> None:
    assert saferegex.literal_prefix(NS.regex_to_cluster(".*")) == "acme."
    assert saferegex.literal_prefix(NS.regex_to_cluster("ord(ers)x.*")) == "acme.ordersx"
    assert saferegex.literal_prefix(NS.regex_to_cluster("a|b")) == "acme."
    assert saferegex.literal_prefix("^acme\\.orders.*") == "acme.orders"
    assert saferegex.literal_prefix(".*") == ""
    assert saferegex.literal_prefix("acme\\.(x|y)") == "acme."
    assert saferegex.literal_prefix("acme(\\.x)?") == "acme"


def _heartbeat(group: str, regex: str) -> Any:
    cls = apis.request_schema(68, 1)
    return cls(
        group_id=group, member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        subscribed_topic_names=None, subscribed_topic_regex=regex,
        server_assignor=None, topic_partitions=None,
    )  # fmt: skip


def _tenant_check(prefix: str, denied_prefix: str | None = None) -> units.Check:
    """Every group, ALL on topics PREFIXED ``prefix``, optionally a DENY READ on topics
    PREFIXED ``denied_prefix``."""

    def check(rtype: R, name: str, op: Op) -> bool:
        denied = denied_prefix is not None and name.startswith(denied_prefix)
        if denied and rtype is R.TOPIC and op is Op.READ:
            return False
        return rtype is R.GROUP or (rtype is R.TOPIC and name.startswith(prefix))

    return check


def _refused(request: Any, check: units.Check) -> tuple[int, str | None] | None:
    verdict = units.consumer_group_heartbeat(request, check, apis.response_schema(68, 1))
    if verdict.local is None:
        return None
    return int(verdict.local.error_code), verdict.local.error_message


def test_namespaced_regex_is_authorized_on_the_tenants_prefix() -> None:
    request = _heartbeat("acme.g", NS.regex_to_cluster(".*"))
    assert _refused(request, _tenant_check("acme.")) is None
    refused = _refused(request, _tenant_check("other."))
    assert refused is not None and refused[0] == ErrorCode.topic_authorization_failed
    # a DENY on the prefix (or on all of it) is honoured
    denied = _refused(request, _tenant_check("acme.", denied_prefix="acme."))
    assert denied is not None and denied[0] == ErrorCode.topic_authorization_failed


def test_prefixed_tenants_regex_must_start_with_its_prefix() -> None:
    check = _tenant_check("acme.")
    assert _refused(_heartbeat("acme.g", "acme\\..*"), check) is None
    refused = _refused(_heartbeat("acme.g", ".*"), check)
    assert refused is not None and "prefix" in (refused[1] or ""), refused
    assert _refused(_heartbeat("acme.g", "^acme\\.(orders|payments)$"), check) is None
    for pattern in (".*", "acme.*", "acme\\..*|other\\..*", "(acme|other)\\..*", "a.*"):
        refused = _refused(_heartbeat("acme.g", pattern), check)
        assert refused is not None and refused[0] == ErrorCode.topic_authorization_failed, pattern


def test_a_literal_grant_on_the_prefix_name_is_not_a_grant_on_the_pattern() -> None:
    def literal_only(rtype: R, name: str, op: Op) -> bool:  # LITERAL acme. (a topic's name)
        return rtype is R.GROUP or name == "acme."

    refused = _refused(_heartbeat("acme.g", "acme\\..*"), literal_only)
    assert refused is not None and refused[0] == ErrorCode.topic_authorization_failed


@pytest.mark.parametrize("pattern", [")|(.*", "\\Qacme.\\E.*", "(?i)acme\\..*", "acme\\.(?=x)"])
def test_regex_outside_the_shared_syntax_is_an_invalid_regular_expression(pattern: str) -> None:
    refused = _refused(_heartbeat("acme.g", pattern), _tenant_check(""))
    assert refused is not None and refused[0] == ErrorCode.invalid_regular_expression


def test_super_users_regex_is_allowed_anywhere() -> None:
    assert _refused(_heartbeat("ops.g", ".*"), lambda rtype, name, op: True) is None
