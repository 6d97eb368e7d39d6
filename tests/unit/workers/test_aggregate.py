"""One /metrics for the process group (``gateway.workers.aggregate``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.observability import GatewayMetrics
from gateway.workers.aggregate import Retired, merge, parse, render


def worker(requests: int, open_connections: int, latency_s: float) -> str:
    metrics = GatewayMetrics()
    for _ in range(requests):
        metrics.observe("Produce", "acme", bytes_in=100, latency_ms=latency_s * 1000)
    for _ in range(open_connections):
        metrics.connection_opened("plain")
    return metrics.exposition().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_histograms_and_gauges_are_summed_over_the_workers() -> None:
    a, b = parse(worker(3, 2, 0.003)), parse(worker(5, 1, 0.2))
    text = render(merge([a, b]))
    assert parse(text) == merge([a, b])  # written back as it was read
    got = samples(text)
    produce = (("api", "Produce"), ("tenant", "acme"))
    assert got[("kgw_requests_total", produce)] == 8
    assert got[("kgw_request_bytes_total", produce)] == 800
    assert got[("kgw_open_connections", (("listener", "plain"),))] == 3
    assert got[("kgw_request_latency_seconds_count", (("api", "Produce"),))] == 8
    bucket = (("api", "Produce"), ("le", "0.005"))
    assert got[("kgw_request_latency_seconds_bucket", bucket)] == 3
    assert not any(name.endswith("_created") for name, _ in got)
    lines = [line for line in text.splitlines() if "latency_seconds_bucket" in line]
    bounds = [line.split('le="')[1].split('"')[0] for line in lines]
    assert bounds[-1] == "+Inf" and bounds[0] == "0.0005"  # buckets stay in order


def test_a_dead_workers_counters_stay_in_the_group_but_not_its_gauges() -> None:
    retired = Retired()
    first = parse(worker(4, 2, 0.01))
    retired.seen(100, first)
    retired.gone(100)
    retired.gone(100)  # a second report of the same death adds nothing
    after = parse(worker(1, 1, 0.01))  # the replacement
    got = samples(render(retired.group([after])))
    assert got[("kgw_requests_total", (("api", "Produce"), ("tenant", "acme")))] == 5
    assert got[("kgw_open_connections", (("listener", "plain"),))] == 1


def test_a_worker_never_scraped_leaves_nothing_behind() -> None:
    retired = Retired()
    retired.gone(42)
    assert retired.group([]) == {}


def test_malformed_text_is_an_error() -> None:
    try:
        parse('kgw_requests_total{api="x" 1\n')
    except ValueError:
        return
    raise AssertionError("malformed exposition accepted")


def test_gauges_of_shared_state_are_not_summed() -> None:
    def quota(redis_up: int, degraded: int, leases: int) -> str:
        return (
            "# TYPE kgw_quota_redis_up gauge\n"
            f"kgw_quota_redis_up {redis_up}\n"
            "# TYPE kgw_quota_degraded gauge\n"
            f"kgw_quota_degraded {degraded}\n"
            "# TYPE kgw_quota_buckets_shared gauge\n"
            f"kgw_quota_buckets_shared {leases}\n"
        )

    got = samples(render(merge([parse(quota(1, 0, 3)), parse(quota(0, 1, 4))])))
    assert got[("kgw_quota_redis_up", ())] == 0  # up only if up in every worker
    assert got[("kgw_quota_degraded", ())] == 1  # degraded if degraded anywhere
    assert got[("kgw_quota_buckets_shared", ())] == 7  # held per process: summed


def test_read_as_prometheus_client_reads_it() -> None:
    """The parser sees what prometheus_client's own parser sees in what the gateway and
    prometheus_client write: every series, escaped labels, exponents, +Inf, untyped."""
    metrics = GatewayMetrics()
    for tenant in ("acme", 'we"ird\\ten ant\nx', "big"):
        metrics.observe("produce", tenant, bytes_in=1_200_000_000, latency_ms=45_000.0)
        metrics.observe("fetch", tenant, error_code=3, decision="deny", throttle_ms=250)
    metrics.connection_opened("plain")
    metrics.auth_failed("plain", "SCRAM-SHA-512")
    registry = CollectorRegistry()
    Gauge("kgw_quota_redis_up", "Redis reachable", registry=registry).set(1)
    Counter("kgw_other", "labelled {braces} and = signs", ["what"], registry=registry).labels(
        what="a} b{=c"
    ).inc(2.5)
    Histogram("kgw_h", "plain", buckets=(1.0, 2.0), registry=registry).observe(1.5)
    text = metrics.exposition().decode() + generate_latest(registry).decode() + "kgw_untyped 4\n"
    ours = {
        (name, labels): value
        for family in parse(text).values()
        for (name, labels), value in family.samples.items()
    }
    theirs = samples(text)
    assert {name for name, _ in theirs if name.endswith("_created")}  # there to be dropped
    theirs = {key: value for key, value in theirs.items() if not key[0].endswith("_created")}
    assert len(ours) == len(theirs)
    reread = samples(render(parse(text)))
    assert reread == theirs
