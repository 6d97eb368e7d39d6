"""The collector's exposition, and ``kgw status`` reading it back (no I/O)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest

from gateway.monitoring.canary import CanaryBook
from gateway.monitoring.collector import MonitoringCollector
from gateway.monitoring.health import PartitionInfo, assess
from gateway.monitoring.lag import GroupLag
from gateway.monitoring.state import MonitoringState
from gateway.monitoring.status import render, samples, summarize


def exposition(state: MonitoringState) -> str:
    registry = CollectorRegistry()
    registry.register(MonitoringCollector(state))
    return generate_latest(registry).decode()


def populated() -> MonitoringState:
    state = MonitoringState(partition_metrics=True)
    state.health = assess(
        [1, 2, 3],
        [PartitionInfo("acme.t", 0, -1, (1, 2), ()), PartitionInfo("acme.t", 1, 2, (2, 3), (2, 3))],
        min_isr={},
        expected_brokers=3,
        controller=1,
        log_sizes={1: {"acme.t": 2048}},
    )
    lag = GroupLag(
        "acme.g", "acme", "classic", {("acme.t", 0): 7, ("acme.t", 1): 3}, consume_rate=0.0
    )
    state.lag, state.tenant_lag, state.thresholds = [lag], {"acme": 10}, {"acme": 5}
    book = CanaryBook(run="r")
    seq, value = book.next_record(0)
    book.produced_ok(0, seq, 0.0, 0.0)
    book.received(value, 0.0)
    state.canary = book
    state.succeeded("health", 1000.0)
    return state


def test_exposition_has_bounded_labels_and_values() -> None:
    found = samples(exposition(populated()))
    assert found["kgw_cluster_offline_partitions"][0][1] == 1
    assert found["kgw_cluster_under_replicated_partitions"][0][1] == 1
    assert found["kgw_consumer_group_lag_records"] == [
        ({"tenant": "acme", "group": "acme.g", "type": "classic"}, 10.0)
    ]
    assert math.isinf(found["kgw_consumer_group_catch_up_seconds"][0][1])
    partition = {
        labels["partition"]: v for labels, v in found["kgw_consumer_partition_lag_records"]
    }
    assert partition == {"0": 7.0, "1": 3.0}
    assert found["kgw_canary_produced_records_total"][0][1] == 1
    for name, values in found.items():
        for labels, _ in values:
            assert set(labels) <= {"tenant", "group", "type", "topic", "partition", "broker",
                                   "quantile", "loop"}, name  # fmt: skip


def test_empty_state_exports_no_partial_figures() -> None:
    found = samples(exposition(MonitoringState()))
    assert "kgw_cluster_partitions" not in found
    assert "kgw_canary_availability_ratio" not in found


def test_status_summary_and_screen() -> None:
    text = exposition(populated())
    summary = summarize([("http://a/metrics", text), ("http://b/metrics", None)])
    cluster = summary["cluster"]
    assert (cluster["offline_partitions"], cluster["brokers_registered"]) == (1, 3)
    assert cluster["brokers"]["1"]["log_bytes"] == 2048
    assert summary["lag"] == [{"tenant": "acme", "lag": 10, "threshold": 5}]
    assert summary["canary"]["produced"] == 1
    assert [g["up"] for g in summary["gateways"]] == [True, False]
    screen = render(summary)
    assert "DEGRADED" in screen and "OVER" in screen and "DOWN" in screen
    assert len(screen.splitlines()) <= 24


def test_status_with_nothing_up() -> None:
    summary = summarize([("http://a/metrics", None)])
    assert summary["cluster"] is None
    assert "no figures" in render(summary)
