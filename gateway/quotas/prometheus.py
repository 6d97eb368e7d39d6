"""``QuotaEngine.metrics()`` on the gateway's ``/metrics``, read at scrape time.

Every figure becomes ``kgw_quota_<name>``; a figure named ``<name>.<label>``
(``throttled_total.produce_bytes``, ``connections_refused_total.tenant_max_connections``)
becomes one series of ``kgw_quota_<name>`` with ``kind="<label>"``. Names ending in
``_total`` are counters, the rest (``redis_up``, ``degraded``…) gauges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "kgw_quota_"


class QuotaCollector(Collector):
    def __init__(self, figures: Callable[[], Mapping[str, float]]) -> None:
        self.figures = figures

    def collect(self) -> Iterable[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for key, value in sorted(self.figures().items()):
            name, _, kind = key.partition(".")
            family = families.get(name)
            if family is None:
                labels = ["kind"] if kind else None
                text = f"quota engine: {name.replace('_', ' ')}"
                if name.endswith("_total"):
                    base = PREFIX + name[: -len("_total")]
                    family = CounterMetricFamily(base, text, labels=labels)
                else:
                    family = GaugeMetricFamily(PREFIX + name, text, labels=labels)
                families[name] = family
            if kind:
                family.add_metric([kind], value)
            else:
                family.add_metric([], value)
        return list(families.values())
