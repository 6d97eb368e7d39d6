"""Cluster health from partitions, brokers and log-dir sizes (no I/O)."""

from __future__ import annotations

import pytest

from gateway.monitoring.health import PartitionInfo, assess, imbalance
from gateway.monitoring.tenancy import OTHER, SERVICE, TenantLabels


def part(
    topic: str, index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]
) -> PartitionInfo:
    return PartitionInfo(topic, index, leader, replicas, isr)


def test_offline_under_replicated_and_under_min_isr_are_counted() -> None:
    partitions = [
        part("acme.a", 0, 1, (1, 2, 3), (1, 2, 3)),  # healthy
        part("acme.a", 1, 2, (2, 3, 1), (2, 3)),  # under-replicated, not under min ISR (2)
        part("acme.a", 2, 3, (3, 1, 2), (3,)),  # under-replicated and under min ISR
        part("beta.b", 0, -1, (1, 2), ()),  # offline (and both)
    ]
    health = assess(
        [1, 2, 3],
        partitions,
        min_isr={"acme.a": 2},
        default_min_isr=1,
        expected_brokers=4,
        controller=2,
    )
    assert (health.partitions, health.offline, health.under_replicated, health.under_min_isr) == (
        4,
        1,
        3,
        2,
    )
    assert health.offline_topics == ("beta.b",)
    assert health.partitions_per_broker == {1: 4, 2: 4, 3: 3}
    assert health.leaders_per_broker == {1: 1, 2: 1, 3: 1}
    assert (health.brokers_registered, health.brokers_expected, health.brokers_missing) == (3, 4, 1)
    assert health.controller == 2


def test_expected_brokers_default_to_registered() -> None:
    health = assess([1, 2], [], min_isr={})
    assert health.brokers_expected == 2 and health.brokers_missing == 0


def test_imbalance() -> None:
    assert imbalance([]) == 0.0
    assert imbalance([0, 0]) == 0.0
    assert imbalance([4, 4, 4]) == 0.0
    assert imbalance([6, 3, 3]) == pytest.approx(0.5)


def test_log_sizes_per_broker_and_tenant() -> None:
    sizes = {1: {"acme.a": 100, "beta.b": 10, "__consumer_offsets": 5}, 2: {"acme.a": 100}}
    health = assess([1, 2], [], min_isr={}, log_sizes=sizes, tenants=TenantLabels())
    assert health.log_bytes_per_broker == {1: 115, 2: 100}
    assert health.log_bytes_per_tenant == {"acme": 200, "beta": 10, SERVICE: 5}


def test_tenant_labels_are_bounded() -> None:
    labels = TenantLabels(max_tenants=2)
    assert [labels.of_resource(n) for n in ("a.x", "b.y", "c.z", "a.w")] == ["a", "b", OTHER, "a"]
    assert labels.of_resource("nodot") == SERVICE
    assert labels.of_resource(".x") == SERVICE and labels.of_resource("a.") == SERVICE
    assert TenantLabels("{tenant}-").tenant_of("acme-orders") == "acme"
    assert TenantLabels(known={"acme"}).tenant_of("beta.x") is None
