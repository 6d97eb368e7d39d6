"""One /metrics for the process group (``gateway.workers.aggregate``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gateway.observability import GatewayMetrics
from gateway.workers.aggregate import Retired, merge, parse, to_metrics


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


class _Fixed(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


def render(families: dict) -> str:  # type: ignore[type-arg]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(to_metrics(families)))
    return generate_latest(registry).decode()


def test_counters_histograms_and_gauges_are_summed_over_the_workers() -> None:
    a, b = parse(worker(3, 2, 0.003)), parse(worker(5, 1, 0.2))
    text = render(merge([a, b]))
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
