"""Which quota applies: the most specific target, per kind; plans for tenants."""

from __future__ import annotations

import pytest

from gateway.quotas import PlanConfig, QuotaKind, Subject
from gateway.quotas.model import InvalidQuotaError, Resolver, Target, TargetType, check_values

from .conftest import ALICE, settings

GOLD = PlanConfig(produce_bytes=1000, fetch_bytes=2000, fetch_bytes_burst=50)
BRONZE = PlanConfig(produce_bytes=10)


def resolver(**kwargs: object) -> Resolver:
    snapshot = settings(**kwargs)  # type: ignore[arg-type]
    return Resolver(snapshot, {"gold": GOLD, "bronze": BRONZE}, "bronze", default_burst_s=2.0)


def test_api_key_beats_principal_beats_tenant() -> None:
    quotas = {
        "api-key:key-1": {"produce_bytes": 1},
        "principal:User:alice": {"produce_bytes": 2},
        "tenant:acme": {"produce_bytes": 3},
    }
    r = resolver(quotas=quotas)
    limit = r.limit(ALICE, QuotaKind.PRODUCE_BYTES)
    assert limit is not None and (limit.rate, limit.source) == (1, "api-key:key-1")
    other_key = Subject("User:alice", "key-2", "acme", "h")
    assert r.limit(other_key, QuotaKind.PRODUCE_BYTES).rate == 2  # type: ignore[union-attr]
    bob = Subject("User:bob", None, "acme", "h")
    assert r.limit(bob, QuotaKind.PRODUCE_BYTES).rate == 3  # type: ignore[union-attr]


def test_resolution_is_per_kind() -> None:
    quotas = {"api-key:key-1": {"produce_bytes": 1}, "tenant:acme": {"fetch_bytes": 7}}
    r = resolver(quotas=quotas)
    assert r.limit(ALICE, QuotaKind.PRODUCE_BYTES).source == "api-key:key-1"  # type: ignore[union-attr]
    assert r.limit(ALICE, QuotaKind.FETCH_BYTES).source == "tenant:acme"  # type: ignore[union-attr]


def test_the_tenants_plan_is_the_fallback_and_its_bucket_is_the_tenants() -> None:
    r = resolver(assignments={"acme": "gold"})
    alice = r.limit(ALICE, QuotaKind.FETCH_BYTES)
    bob = r.limit(Subject("User:bob", None, "acme", "h"), QuotaKind.FETCH_BYTES)
    assert alice is not None and bob is not None
    assert (alice.rate, alice.burst) == (2000, 50)
    assert alice.bucket == bob.bucket  # one budget for the whole tenant
    assert alice.source == "plan:gold (tenant:acme)"


def test_unassigned_tenants_get_the_default_plan() -> None:
    r = resolver()
    limit = r.limit(Subject("User:x", None, "other", "h"), QuotaKind.PRODUCE_BYTES)
    assert limit is not None and limit.rate == 10
    assert r.limit(Subject("User:x", None, "other", "h"), QuotaKind.FETCH_BYTES) is None


def test_a_subject_without_tenant_gets_the_default_plan_per_principal() -> None:
    r = resolver()
    a = r.limit(Subject("User:a", None, None, "h"), QuotaKind.PRODUCE_BYTES)
    b = r.limit(Subject("User:b", None, None, "h"), QuotaKind.PRODUCE_BYTES)
    assert a is not None and b is not None and a.bucket != b.bucket


def test_without_any_plan_nothing_is_limited() -> None:
    r = Resolver(settings(), {}, None, 1.0)
    assert all(r.limit(ALICE, kind) is None for kind in QuotaKind)


def test_the_burst_defaults_to_seconds_of_the_rate() -> None:
    r = resolver(quotas={"tenant:acme": {"requests": 50}})
    assert r.limit(ALICE, QuotaKind.REQUESTS).burst == 100  # type: ignore[union-attr]
    r = resolver(quotas={"tenant:acme": {"requests": 50, "requests_burst": 5}})
    assert r.limit(ALICE, QuotaKind.REQUESTS).burst == 5  # type: ignore[union-attr]


def test_a_stored_plan_overrides_a_configured_one_of_the_same_name() -> None:
    r = resolver(plans={"gold": PlanConfig(produce_bytes=5)}, assignments={"acme": "gold"})
    assert r.limit(ALICE, QuotaKind.PRODUCE_BYTES).rate == 5  # type: ignore[union-attr]
    assert r.limit(ALICE, QuotaKind.FETCH_BYTES) is None


def test_an_assignment_to_a_vanished_plan_falls_back_to_the_default() -> None:
    r = resolver(assignments={"acme": "platinum"})
    plan = r.plan_for("acme")
    assert plan is not None and plan.name == "bronze"


def test_connection_limits_come_from_the_tenant_then_its_plan() -> None:
    plans = {"p": PlanConfig(max_connections=10, connection_rate=5)}
    r = Resolver(settings(quotas={"tenant:acme": {"max_connections": 3}}), plans, "p", 1.0)
    limits = r.tenant_connections("acme")
    assert (limits.max_connections, limits.connection_rate) == (3, 5)


@pytest.mark.parametrize(
    ("target", "values", "reason"),
    [
        ("tenant:t", {"produce_bytez": 1}, "unknown quota key"),
        ("ip:1.2.3.4", {"produce_bytes": 1}, "not settable on ip"),
        ("principal:User:a", {"max_connections": 1}, "not settable on principal"),
        ("tenant:t", {"produce_bytes": 0}, "must be > 0"),
        ("tenant:t", {"max_connections": 1.5}, "whole number"),
        ("tenant:t", {"requests": float("nan")}, "finite"),
    ],
)
def test_bad_values_are_refused(target: str, values: dict[str, float], reason: str) -> None:
    with pytest.raises(InvalidQuotaError, match=reason):
        check_values(Target.parse(target), values)


def test_targets_parse_and_print() -> None:
    target = Target.parse("principal:User:alice")
    assert target == Target(TargetType.PRINCIPAL, "User:alice")
    assert str(target) == "principal:User:alice"
    for bad in ("user:alice", "tenant:", "tenant"):
        with pytest.raises(InvalidQuotaError):
            Target.parse(bad)


@pytest.mark.parametrize(
    ("written", "peer"),
    [
        ("2001:DB8::7", "2001:db8::7"),
        ("2001:db8:0:0:0:0:0:8", "2001:db8::8"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("203.0.113.10", "::ffff:203.0.113.10"),
    ],
)
def test_an_address_quota_holds_however_the_address_is_written(written: str, peer: str) -> None:
    from gateway.quotas.model import Target, TargetType

    assert Target.parse(f"ip:{written}") == Target(TargetType.ADDRESS, peer)


def test_an_address_quota_needs_an_address() -> None:
    from gateway.quotas.model import InvalidQuotaError, Target, check_values

    with pytest.raises(InvalidQuotaError, match="not an IP address"):
        check_values(Target.parse("ip:not-an-address"), {"max_connections": 1})
