"""Metrics follow the traffic they are told about; label cardinality stays bounded."""

from __future__ import annotations

import struct

from prometheus_client.parser import text_string_to_metric_families

from gateway.accesslog.writer import SinkStats
from gateway.observability.metrics import GatewayMetrics


def value(metrics: GatewayMetrics, name: str, **labels: str) -> float:
    found = metrics.sample_value(name, labels)
    return 0.0 if found is None else found


def entry(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "api": "produce",
        "tenant": "tenant-a",
        "decision": "allow",
        "error_code": 0,
        "bytes_in": 1000,
        "bytes_out": 50,
        "records": 10,
        "throttle_ms": 0,
        "latency_ms": 2.0,
    }
    base.update(changes)
    return base


def test_requests_bytes_records_and_latency() -> None:
    metrics = GatewayMetrics()
    for _ in range(3):
        metrics.observe(**entry())
    metrics.observe(**entry(api="fetch", bytes_in=80, bytes_out=5000, latency_ms=300.0))
    produce = {"api": "produce", "tenant": "tenant-a"}
    assert value(metrics, "kgw_requests_total", **produce) == 3
    assert value(metrics, "kgw_request_bytes_total", **produce) == 3000
    assert value(metrics, "kgw_response_bytes_total", **produce) == 150
    assert value(metrics, "kgw_records_total", **produce) == 30
    assert value(metrics, "kgw_response_bytes_total", api="fetch", tenant="tenant-a") == 5000
    assert value(metrics, "kgw_request_latency_seconds_count", api="produce") == 3
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="produce", le="0.0025") == 3
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="fetch", le="0.25") == 0
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="fetch", le="0.5") == 1


def test_denials_errors_and_throttling() -> None:
    metrics = GatewayMetrics()
    metrics.observe(**entry(decision="deny", error_code=29, records=None))
    metrics.observe(**entry(decision="partial", error_code=29))
    metrics.observe(**entry(decision="none", throttle_ms=1500))
    labels = {"api": "produce", "tenant": "tenant-a"}
    assert value(metrics, "kgw_denied_requests_total", **labels) == 2
    assert value(metrics, "kgw_request_errors_total", **labels) == 2
    assert value(metrics, "kgw_throttle_seconds_total", **labels) == 1.5


def test_tenants_beyond_the_limit_are_other() -> None:
    metrics = GatewayMetrics(max_tenants=2)
    for tenant in ("a", "b", "c", "d", None):
        metrics.observe(**entry(tenant=tenant))
    assert value(metrics, "kgw_requests_total", api="produce", tenant="a") == 1
    assert value(metrics, "kgw_requests_total", api="produce", tenant="b") == 1
    assert value(metrics, "kgw_requests_total", api="produce", tenant="other") == 3


def test_unknown_tenant_until_authentication_names_one() -> None:
    metrics = GatewayMetrics()
    metrics.observe(**entry(tenant=None))
    assert value(metrics, "kgw_requests_total", api="produce", tenant="unknown") == 1


def test_connections_authentication_and_upstream() -> None:
    metrics = GatewayMetrics()
    metrics.connection_opened("public")
    metrics.connection_opened("public")
    metrics.connection_closed("public")
    metrics.auth_failed("public", "SCRAM-SHA-256")
    metrics.auth_failed("public", None)
    metrics.upstream_error("connect")
    assert value(metrics, "kgw_open_connections", listener="public") == 1
    assert value(metrics, "kgw_connections_total", listener="public") == 2
    labels = {"listener": "public", "mechanism": "SCRAM-SHA-256"}
    assert value(metrics, "kgw_authentication_failures_total", **labels) == 1
    labels = {"listener": "public", "mechanism": "none"}
    assert value(metrics, "kgw_authentication_failures_total", **labels) == 1
    assert value(metrics, "kgw_upstream_errors_total", kind="connect") == 1


def test_access_log_figures_are_read_at_scrape_time() -> None:
    metrics = GatewayMetrics()
    stats = {"file": SinkStats(written=5, queued=2, dropped={"queue_full": 3})}
    metrics.watch_access_log(lambda: stats)
    assert value(metrics, "kgw_accesslog_written_total", sink="file") == 5
    labels = {"sink": "file", "reason": "queue_full"}
    assert value(metrics, "kgw_accesslog_dropped_total", **labels) == 3
    stats["file"] = SinkStats(written=9, queued=0, dropped={"queue_full": 4, "sink_error": 1})
    assert value(metrics, "kgw_accesslog_dropped_total", **labels) == 4
    assert value(metrics, "kgw_accesslog_queued", sink="file") == 0


def test_exposition_parses() -> None:
    metrics = GatewayMetrics()
    metrics.observe(**entry())
    names = {f.name for f in text_string_to_metric_families(metrics.exposition().decode())}
    assert {"kgw_requests", "kgw_request_latency_seconds", "kgw_open_connections"} <= names


def _reference(observations: list[dict[str, object]]) -> list[str]:
    """What prometheus_client's own Counter and Histogram write for ``observations``:
    the text the tallies must reproduce (``*_created`` samples aside)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from gateway.observability.metrics import (
        LATENCY_BUCKETS,
        LATENCY_HELP,
        LATENCY_NAME,
        REQUEST_COUNTERS,
    )

    registry = CollectorRegistry()
    counters = {
        field: Counter(name, documentation, ["api", "tenant"], registry=registry)
        for name, documentation, field in REQUEST_COUNTERS
    }
    latency = Histogram(LATENCY_NAME, LATENCY_HELP, ["api"], buckets=LATENCY_BUCKETS,
                        registry=registry)  # fmt: skip
    for o in observations:
        labels = {"api": str(o["api"]), "tenant": str(o["tenant"])}
        counters["requests"].labels(**labels).inc()
        counters["errors"].labels(**labels)
        counters["denied"].labels(**labels)
        if o["error_code"]:
            counters["errors"].labels(**labels).inc()
        if o["decision"] in ("deny", "partial"):
            counters["denied"].labels(**labels).inc()
        counters["bytes_in"].labels(**labels).inc(o["bytes_in"])
        counters["bytes_out"].labels(**labels).inc(o["bytes_out"])
        counters["records"].labels(**labels).inc(o["records"] or 0)
        throttle_ms = o["throttle_ms"]
        counters["throttle_s"].labels(**labels).inc(throttle_ms / 1000.0)
        latency.labels(api=labels["api"]).observe(o["latency_ms"] / 1000.0)
    return [ln for ln in generate_latest(registry).decode().splitlines() if "_created" not in ln]


def test_request_series_read_as_prometheus_client_writes_them() -> None:
    # bounds hit exactly, zero, beyond the last bound; errors, denials, throttles
    latencies = [0.0, 0.5, 1.0, 2.5, 7.0, 250.0, 1000.0, 30000.0, 45000.0, 0.3]
    observations = [
        entry(
            api=api,
            tenant=tenant,
            latency_ms=latencies[i % len(latencies)],
            error_code=29 if i % 3 == 0 else 0,
            decision=("deny", "allow", "partial", "none")[i % 4],
            records=None if i % 5 == 0 else i,
            throttle_ms=1500 if i % 7 == 0 else 0,
            bytes_in=i * 11,
            bytes_out=i * 101,
        )
        for i, (api, tenant) in enumerate(
            [("Produce", "tenant-a"), ("Fetch", 'te"n\\ant\nb'), ("Produce", 'te"n\\ant\nb')] * 9
        )
    ]
    metrics = GatewayMetrics()
    for o in observations:
        metrics.observe(**o)
    reference = _reference(observations)
    families = {line.split()[2] for line in reference if line.startswith("# TYPE")}
    ours = [
        line
        for line in metrics.exposition().decode().splitlines()
        if line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(tuple(families))
    ]
    assert len(families) == 8
    assert ours == reference


def test_an_observation_on_a_bound_falls_in_that_bucket() -> None:
    metrics = GatewayMetrics()
    metrics.observe(**entry(latency_ms=1.0))  # 0.001 s: the "le=0.001" bucket
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="produce", le="0.0005") == 0
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="produce", le="0.001") == 1
    assert value(metrics, "kgw_request_latency_seconds_bucket", api="produce", le="+Inf") == 1
    assert value(metrics, "kgw_request_latency_seconds_sum", api="produce") == 0.001


def test_api_keys_kio_does_not_know_share_one_label() -> None:
    # the client picks the key: a label per key would add series without bound
    from gateway.accesslog.exchange import begin

    metrics = GatewayMetrics()
    for key in (9_999, 10_000, 32_767, -1):
        frame = struct.pack(">ihhih", 10, key, 0, 7, -1)
        metrics.observe_exchange(begin(frame), "tenant-a")
    produce = struct.pack(">ihhih", 10, 0, 9, 8, -1)
    metrics.observe_exchange(begin(produce), "tenant-a")
    names = {
        sample.labels["api"]
        for family in text_string_to_metric_families(metrics.exposition().decode())
        if family.name == "kgw_requests"
        for sample in family.samples
    }
    assert names == {"unknown", "produce"}
    assert value(metrics, "kgw_requests_total", api="unknown", tenant="tenant-a") == 4
