"""Licence limits: a tenant's plan against what it has and what it asks for."""

from __future__ import annotations

import pytest

from gateway.quotas import (
    POLICY_VIOLATION,
    THROTTLING_QUOTA_EXCEEDED,
    AlterRetention,
    CreatePartitions,
    CreateTopic,
    PlanConfig,
    TenantUsage,
    check_licence,
    check_requests,
    tenant_usage,
)
from gateway.quotas.model import Plan

BRONZE = Plan(
    "bronze",
    PlanConfig(
        max_topics=3,
        max_partitions_per_topic=6,
        max_total_partitions=10,
        max_retention_ms=86_400_000,
    ),
)
CLUSTER = [
    ("acme.orders", 4),
    ("acme.payments", 2),
    ("acme-other.x", 50),  # another tenant whose name starts the same way
    ("globex.orders", 12),
    ("__consumer_offsets", 50),
]


def usage() -> TenantUsage:
    return tenant_usage("acme", CLUSTER)


def test_usage_counts_only_the_tenants_namespace() -> None:
    u = usage()
    assert dict(u.topics) == {"acme.orders": 4, "acme.payments": 2}
    assert (u.topic_count, u.total_partitions) == (2, 6)
    assert tenant_usage("acme", CLUSTER, "{tenant}-").topics == {"acme-other.x": 50}


def test_within_the_plan_is_allowed() -> None:
    assert check_licence(BRONZE, usage(), CreateTopic("acme.audit", 3, 3_600_000)) == (
        True,
        0,
        None,
    )


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (CreateTopic("acme.big", 7), "at most 6 partitions per topic"),
        (CreateTopic("acme.wide", 5), "at most 10 partitions in all; it has 6 and asked for 5"),
        (CreateTopic("acme.keep", 1, retention_ms=-1), "infinite retention"),
        (CreateTopic("acme.keep", 1, retention_ms=86_400_001), "retention.ms up to 86400000"),
        (CreateTopic("globex.sneaky", 1), "outside tenant 'acme''s namespace"),
        (CreateTopic("acme.default", -1), "give the number of partitions explicitly"),
        (CreatePartitions("acme.orders", 7), "at most 6 partitions per topic"),
        (AlterRetention("acme.orders", 7 * 86_400_000), "asked for 604800000"),
    ],
)
def test_beyond_the_plan_is_a_policy_violation(request_: object, words: str) -> None:
    ok, code, message = check_licence(BRONZE, usage(), request_)  # type: ignore[arg-type]
    assert not ok and code == POLICY_VIOLATION
    assert message is not None and words in message and "bronze" in message


def test_adding_partitions_counts_against_the_total() -> None:
    u = tenant_usage("acme", [("acme.orders", 4), ("acme.payments", 5)])
    ok, code, message = check_licence(BRONZE, u, CreatePartitions("acme.orders", 6))
    assert (ok, code) == (False, POLICY_VIOLATION)
    assert message == (
        "plan 'bronze' allows tenant 'acme' at most 10 partitions in all; "
        "it has 9 and asked for 2 more"
    )
    assert check_licence(BRONZE, u, CreatePartitions("acme.orders", 5)).ok


def test_the_topic_count_limit() -> None:
    u = tenant_usage("acme", [("acme.a", 1), ("acme.b", 1), ("acme.c", 1)])
    ok, code, message = check_licence(BRONZE, u, CreateTopic("acme.d", 1))
    assert (ok, code) == (False, POLICY_VIOLATION)
    assert message == "plan 'bronze' allows tenant 'acme' at most 3 topics and it has 3"


def test_several_topics_in_one_request_count_against_each_other() -> None:
    requests = [CreateTopic("acme.x", 2), CreateTopic("acme.y", 2), CreateTopic("acme.z", 1)]
    verdicts = check_requests(BRONZE, usage(), requests)
    assert [v.ok for v in verdicts] == [True, False, False]  # 6 + 2 = 8; then 8 + 2 > 10
    assert "at most 3 topics" in (verdicts[2].message or "")


def test_existing_and_unknown_topics_are_left_to_the_broker() -> None:
    assert check_licence(BRONZE, usage(), CreateTopic("acme.orders", 60)).ok
    assert check_licence(BRONZE, usage(), CreatePartitions("acme.unknown", 6)).ok
    assert check_licence(BRONZE, usage(), CreatePartitions("acme.orders", 2)).ok  # no increase


def test_a_topic_missing_from_the_view_still_meets_the_per_topic_limit() -> None:
    # Brokers' metadata trails a creation by a moment: the count per topic needs no view.
    ok, code, message = check_licence(BRONZE, usage(), CreatePartitions("acme.unknown", 60))
    assert not ok and code == POLICY_VIOLATION
    assert "at most 6 partitions per topic; 'acme.unknown' would have 60" in (message or "")


def test_no_plan_means_no_licence_limits() -> None:
    assert check_licence(None, usage(), CreateTopic("anything", 1000, -1)).ok


def test_the_mutation_rate_is_a_retriable_throttle_after_the_hard_limits() -> None:
    verdict = check_licence(BRONZE, usage(), CreateTopic("acme.t", 1), mutation_throttle_ms=1234)
    assert verdict.error_code == THROTTLING_QUOTA_EXCEEDED
    assert verdict.message == "partition creation rate of plan 'bronze' exceeded; retry in 1234 ms"
    hard = check_licence(BRONZE, usage(), CreateTopic("acme.t", 99), mutation_throttle_ms=1234)
    assert hard.error_code == POLICY_VIOLATION  # retrying would not help
    retention = AlterRetention("acme.orders", 1000)
    assert check_licence(BRONZE, usage(), retention, mutation_throttle_ms=1234).ok
