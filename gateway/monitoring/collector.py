"""The monitoring figures as Prometheus metrics, built from ``MonitoringState`` at scrape time.

Label sets are bounded: ``broker`` (node ids), ``tenant`` (``TenantLabels``: at most
``max_tenants``, then ``other``), ``group`` (at most ``lag.max_groups`` groups), the
canary's ``quantile``; per-partition lag only with ``lag.partition_metrics``. No label
names a connection, a client or an address.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .health import ClusterHealth
from .state import LOOPS, MonitoringState


def _gauge(name: str, doc: str, value: float | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class MonitoringCollector(Collector):
    """Yields the health, lag and canary families from the current state."""

    def __init__(self, state: MonitoringState) -> None:
        self.state = state

    def collect(self) -> Iterable[Metric]:
        yield from self._loops()
        if self.state.health is not None:
            yield from health_families(self.state.health)
        yield from self._lag()
        yield from self._canary()

    def describe(self) -> Iterable[Metric]:
        """Every family name, values empty (``registry.register`` calls this)."""
        return list(metric_families(MonitoringState()))

    def _loops(self) -> Iterable[Metric]:
        errors = CounterMetricFamily(
            "kgw_monitoring_errors", "Monitoring rounds that failed, per loop", labels=["loop"]
        )
        last = GaugeMetricFamily(
            "kgw_monitoring_last_success_timestamp_seconds",
            "When each monitoring loop last completed a round (unix time)",
            labels=["loop"],
        )
        for loop in LOOPS:
            errors.add_metric([loop], self.state.errors.get(loop, 0))
            if loop in self.state.last_success:
                last.add_metric([loop], self.state.last_success[loop])
        return [errors, last]

    def _lag(self) -> Iterable[Metric]:
        state = self.state
        group_lag = GaugeMetricFamily(
            "kgw_consumer_group_lag_records",
            "Records a consumer group is behind, summed over its partitions",
            labels=["tenant", "group", "type"],
        )
        group_max = GaugeMetricFamily(
            "kgw_consumer_group_max_partition_lag_records",
            "The largest lag of a consumer group on any one partition",
            labels=["tenant", "group"],
        )
        rate = GaugeMetricFamily(
            "kgw_consumer_group_consume_rate_records_per_second",
            "Growth of the group's committed offsets over the rate window",
            labels=["tenant", "group"],
        )
        catch_up = GaugeMetricFamily(
            "kgw_consumer_group_catch_up_seconds",
            "Estimated time to consume the group's lag at its recent rate (+Inf: not consuming)",
            labels=["tenant", "group"],
        )
        partition = GaugeMetricFamily(
            "kgw_consumer_partition_lag_records",
            "Records a consumer group is behind on one partition (lag.partition_metrics)",
            labels=["tenant", "group", "topic", "partition"],
        )
        for lag in state.lag:
            group_lag.add_metric([lag.tenant, lag.group, lag.group_type], lag.total)
            group_max.add_metric([lag.tenant, lag.group], lag.max_partition)
            rate.add_metric([lag.tenant, lag.group], lag.consume_rate)
            catch_up.add_metric([lag.tenant, lag.group], lag.catch_up_s)
            if state.partition_metrics:
                for (topic, index), value in sorted(lag.partitions.items()):
                    partition.add_metric([lag.tenant, lag.group, topic, str(index)], value)
        tenant = GaugeMetricFamily(
            "kgw_tenant_consumer_lag_records",
            "Records the tenant's consumer groups are behind, in total",
            labels=["tenant"],
        )
        threshold = GaugeMetricFamily(
            "kgw_tenant_lag_threshold_records",
            "The tenant's lag alert threshold (monitoring.lag.threshold/thresholds)",
            labels=["tenant"],
        )
        for name, total in sorted(state.tenant_lag.items()):
            tenant.add_metric([name], total)
        for name, value in sorted(state.thresholds.items()):
            threshold.add_metric([name], value)
        return [group_lag, group_max, rate, catch_up, partition, tenant, threshold]

    def _canary(self) -> Iterable[Metric]:
        book, label = self.state.canary, [self.state.canary_tenant]
        names = [
            ("produced_records", "Canary records acknowledged by the cluster"),
            ("produce_errors", "Canary produce attempts that failed"),
            ("fetched_records", "Canary records fetched back (first time)"),
            ("fetch_errors", "Canary fetch attempts that failed"),
            ("lost_records", "Acknowledged canary records never fetched back in time"),
            ("duplicated_records", "Canary records fetched back more than once"),
        ]
        counters = {
            n: CounterMetricFamily(f"kgw_canary_{n}", doc, labels=["tenant"]) for n, doc in names
        }
        pending = GaugeMetricFamily(
            "kgw_canary_pending_records",
            "Acknowledged canary records not fetched back yet",
            labels=["tenant"],
        )
        availability = GaugeMetricFamily(
            "kgw_canary_availability_ratio",
            "Successful canary produce and fetch attempts over all, in the window",
            labels=["tenant"],
        )
        sla = GaugeMetricFamily(
            "kgw_canary_availability_sla_ratio",
            "The availability the service promises (canary.availability_sla)",
            labels=["tenant"],
        )
        latency = GaugeMetricFamily(
            "kgw_canary_latency_seconds",
            "End-to-end latency (produce to fetched back) quantiles over the window",
            labels=["tenant", "quantile"],
        )
        if book is not None:
            stats = book.stats(time.monotonic())
            values = {
                "produced_records": stats.produced,
                "produce_errors": stats.produce_errors,
                "fetched_records": stats.fetched,
                "fetch_errors": stats.fetch_errors,
                "lost_records": stats.lost,
                "duplicated_records": stats.duplicated,
            }
            for name, family in counters.items():
                family.add_metric(label, values[name])
            pending.add_metric(label, stats.pending)
            if not math.isnan(stats.availability):
                availability.add_metric(label, stats.availability)
            sla.add_metric(label, self.state.canary_sla)
            for q, seconds in stats.latency_quantiles.items():
                if not math.isnan(seconds):
                    latency.add_metric([*label, f"{q:g}"], seconds)
        return [*counters.values(), pending, availability, sla, latency]


def health_families(health: ClusterHealth) -> list[Metric]:
    """The cluster-health gauges of one snapshot."""
    families: list[Metric] = [
        _gauge("kgw_cluster_brokers_registered", "Brokers in the cluster's metadata",
               health.brokers_registered),
        _gauge("kgw_cluster_brokers_expected", "Brokers the service should have",
               health.brokers_expected),
        _gauge("kgw_cluster_active_controller_id", "Node id of the active controller (-1: unknown)",
               health.controller),
        _gauge("kgw_cluster_partitions", "Partitions in the cluster", health.partitions),
        _gauge("kgw_cluster_offline_partitions", "Partitions without a leader", health.offline),
        _gauge("kgw_cluster_under_replicated_partitions",
               "Partitions whose in-sync replicas are fewer than their replicas",
               health.under_replicated),
        _gauge("kgw_cluster_under_min_isr_partitions",
               "Partitions with fewer in-sync replicas than min.insync.replicas",
               health.under_min_isr),
        _gauge("kgw_cluster_partition_imbalance_ratio",
               "Replicas on the busiest broker over the mean, minus 1",
               health.partition_imbalance),
        _gauge("kgw_cluster_leader_imbalance_ratio",
               "Leaders on the busiest broker over the mean, minus 1", health.leader_imbalance),
    ]  # fmt: skip
    per_broker = [
        ("kgw_cluster_broker_partitions", "Partition replicas per broker",
         health.partitions_per_broker),
        ("kgw_cluster_broker_leaders", "Partition leaders per broker", health.leaders_per_broker),
        ("kgw_cluster_broker_log_size_bytes", "Bytes in the broker's log dirs (DescribeLogDirs)",
         health.log_bytes_per_broker),
    ]  # fmt: skip
    for name, doc, values in per_broker:
        family = GaugeMetricFamily(name, doc, labels=["broker"])
        for broker, value in sorted(values.items()):
            family.add_metric([str(broker)], value)
        families.append(family)
    tenant = GaugeMetricFamily(
        "kgw_tenant_log_size_bytes",
        "Bytes of the tenant's topics over all brokers and replicas (- : the service's own)",
        labels=["tenant"],
    )
    for name, value in sorted(health.log_bytes_per_tenant.items()):
        tenant.add_metric([name], value)
    families.append(tenant)
    return families


def metric_families(state: MonitoringState) -> Iterable[Metric]:
    """Every family the collector can export (for docs, dashboards and tests)."""
    from .health import ClusterHealth as _Health

    collector = MonitoringCollector(state)
    yield from collector._loops()
    yield from health_families(_Health(0, 0, -1, 0, 0, 0, 0))
    yield from collector._lag()
    yield from collector._canary()


def exported_names() -> set[str]:
    """The sample names the monitoring collector exports (``_total`` for counters)."""
    names: set[str] = set()
    for family in metric_families(MonitoringState()):
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names
