"""The quota engine's figures as Prometheus metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from gateway.quotas.prometheus import QuotaCollector


def test_figures_become_gauges_and_labelled_counters() -> None:
    figures = {
        "redis_up": 0.0,
        "degraded": 1.0,
        "throttled_total.produce_bytes": 3.0,
        "throttled_total.fetch_bytes": 1.0,
        "redis_errors_total": 2.0,
    }
    registry = CollectorRegistry()
    registry.register(QuotaCollector(lambda: figures))
    text = generate_latest(registry).decode()
    assert "\nkgw_quota_redis_up 0.0\n" in text
    assert "\nkgw_quota_degraded 1.0\n" in text
    assert 'kgw_quota_throttled_total{kind="produce_bytes"} 3.0' in text
    assert 'kgw_quota_throttled_total{kind="fetch_bytes"} 1.0' in text
    assert "# TYPE kgw_quota_redis_errors_total counter\nkgw_quota_redis_errors_total 2.0" in text
    figures["degraded"] = 0.0  # read at scrape time
    assert "\nkgw_quota_degraded 0.0\n" in generate_latest(registry).decode()
