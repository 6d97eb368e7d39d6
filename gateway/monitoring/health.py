"""Cluster health from metadata, log dirs and the quorum: pure computations, no I/O.

The collecting loop (``loops.py``) turns broker responses into the plain inputs
here (``PartitionInfo``, sizes per broker and topic); ``assess`` returns one
``ClusterHealth`` snapshot, which the collector exposes and ``kgw status`` shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .tenancy import TenantLabels


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as Metadata describes it (``leader`` -1: none)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """One round of health figures; every mapping is bounded by brokers or tenants."""

    brokers_registered: int
    brokers_expected: int
    controller: int  # -1: unknown
    partitions: int
    offline: int
    under_replicated: int
    under_min_isr: int
    partitions_per_broker: dict[int, int] = field(default_factory=dict)
    leaders_per_broker: dict[int, int] = field(default_factory=dict)
    log_bytes_per_broker: dict[int, int] = field(default_factory=dict)
    log_bytes_per_tenant: dict[str, int] = field(default_factory=dict)
    offline_topics: tuple[str, ...] = ()

    @property
    def partition_imbalance(self) -> float:
        return imbalance(self.partitions_per_broker.values())

    @property
    def leader_imbalance(self) -> float:
        return imbalance(self.leaders_per_broker.values())

    @property
    def brokers_missing(self) -> int:
        return max(0, self.brokers_expected - self.brokers_registered)


def imbalance(counts: Iterable[int]) -> float:
    """``max / mean - 1`` over the brokers: 0 when even, 1 when one broker has twice the mean."""
    values = list(counts)
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return 0.0 if mean == 0 else max(values) / mean - 1.0


def assess(
    brokers: Iterable[int],
    partitions: Iterable[PartitionInfo],
    *,
    min_isr: Mapping[str, int],
    default_min_isr: int = 1,
    expected_brokers: int = 0,
    controller: int = -1,
    log_sizes: Mapping[int, Mapping[str, int]] | None = None,
    tenants: TenantLabels | None = None,
) -> ClusterHealth:
    """Health of the cluster from its brokers, partitions and (optionally) log-dir sizes.

    ``min_isr`` is ``min.insync.replicas`` per topic (absent: ``default_min_isr``);
    ``log_sizes`` is bytes per broker and topic; topics are charged to tenants by
    ``tenants`` (topics outside every tenant's namespace count as ``-`` for the service).
    """
    registered = sorted(set(brokers))
    per_broker = dict.fromkeys(registered, 0)
    leaders = dict.fromkeys(registered, 0)
    total = offline = under_replicated = under_min = 0
    offline_topics: set[str] = set()
    for info in partitions:
        total += 1
        for replica in info.replicas:
            per_broker[replica] = per_broker.get(replica, 0) + 1
        if info.leader < 0:
            offline += 1
            offline_topics.add(info.topic)
        else:
            leaders[info.leader] = leaders.get(info.leader, 0) + 1
        if len(info.isr) < len(info.replicas):
            under_replicated += 1
        if len(info.isr) < min_isr.get(info.topic, default_min_isr):
            under_min += 1
    bytes_broker: dict[int, int] = {}
    bytes_tenant: dict[str, int] = {}
    for broker, topics in (log_sizes or {}).items():
        bytes_broker[broker] = sum(topics.values())
        for topic, size in topics.items():
            tenant = tenants.of_resource(topic) if tenants is not None else "-"
            bytes_tenant[tenant] = bytes_tenant.get(tenant, 0) + size
    return ClusterHealth(
        brokers_registered=len(registered),
        brokers_expected=expected_brokers or len(registered),
        controller=controller,
        partitions=total,
        offline=offline,
        under_replicated=under_replicated,
        under_min_isr=under_min,
        partitions_per_broker=per_broker,
        leaders_per_broker=leaders,
        log_bytes_per_broker=bytes_broker,
        log_bytes_per_tenant=bytes_tenant,
        offline_topics=tuple(sorted(offline_topics))[:20],
    )
