"""The gateway's Prometheus metrics, in a registry of its own.

The data path calls a handful of cheap methods (``observe_exchange`` with the
finished exchange, ``connection_opened``/``_closed``,
``auth_failed``, ``upstream_error``). Per request, the figures are plain numbers
(``_Tally`` per api and tenant, ``_Latency`` per api) that ``RequestSeries`` writes
as counters and a histogram when Prometheus scrapes: a request costs a dict lookup, a
few additions and a bisect, not eight ``prometheus_client`` updates each with its
lock, and a scrape writes the text directly (decision 0059). Scrapes and updates
both run on the event loop. Access-log counters are not pushed at all: a collector
reads ``AccessLog.stats()`` when Prometheus scrapes.

Label cardinality is bounded: ``api`` is one of kio's API names (``unknown`` for a
key kio does not know: the client picks the key, and one series per key would let it
add series without bound; the access log keeps the key), ``tenant`` is
the record's tenant (``unknown`` before authentication names one) and the
``max_tenants``-th distinct tenant onwards is counted as ``other``. Latency is a
histogram per API only; per-tenant figures are counters.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ..accesslog.writer import SinkStats

if TYPE_CHECKING:
    from ..accesslog.exchange import Exchange

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
UNKNOWN_TENANT = "unknown"
UNKNOWN_API = "unknown"
OTHER_TENANT = "other"
DENIED = frozenset({"deny", "partial"})


class _Latency:
    """One api's latency histogram: observations per bucket (not cumulative; the last
    one is ``+Inf``) and their sum in seconds."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sum = 0.0


class _Tally:
    """One (api, tenant) pair's request counters, and its api's latency histogram."""

    __slots__ = ("bytes_in", "bytes_out", "denied", "errors", "latency", "records", "requests",
                 "throttle_s")  # fmt: skip

    def __init__(self, latency: _Latency) -> None:
        self.requests = 0
        self.errors = 0
        self.denied = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.records = 0
        self.throttle_s = 0.0
        self.latency = latency


# name, help, the _Tally field: the per-request counters, as scrapes show them
REQUEST_COUNTERS = (
    ("kgw_requests", "Requests answered", "requests"),
    ("kgw_request_errors", "Requests answered with an error code", "errors"),
    ("kgw_denied_requests", "Requests denied by authorization, wholly or in part", "denied"),
    ("kgw_request_bytes", "Request bytes from clients", "bytes_in"),
    ("kgw_response_bytes", "Response bytes to clients", "bytes_out"),
    ("kgw_records", "Records produced (Produce) and fetched (Fetch)", "records"),
    ("kgw_throttle_seconds", "Throttle time imposed by quotas", "throttle_s"),
)
LATENCY_NAME = "kgw_request_latency_seconds"
LATENCY_HELP = "From a request's arrival to its response leaving the gateway"


def sample_number(value: float) -> str:
    """A sample's value as prometheus_client writes it."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def _label(value: str) -> str:
    """A label value escaped as the text format wants (backslash, newline, quote)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


_BOUNDS = (*(sample_number(bound) for bound in LATENCY_BUCKETS), "+Inf")  # the ``le`` labels


class RequestSeries:
    """The per-request counters and the latency histogram, read from the tallies: as
    families (``collect``, for lookups) or straight as text (``render``, for scrapes:
    with thousands of (api, tenant) pairs, prometheus_client's generic formatting of
    each sample kept the event loop busy for more than a second)."""

    def __init__(self, tallies: Mapping[tuple[str, str], _Tally],
                 latencies: Mapping[str, _Latency]) -> None:  # fmt: skip
        self.tallies = tallies
        self.latencies = latencies

    def _snapshot(self) -> tuple[list[tuple[tuple[str, str], _Tally]], list[tuple[str, _Latency]]]:
        return list(self.tallies.items()), list(self.latencies.items())

    def collect(self) -> Iterable[Metric]:
        tallies, latencies = self._snapshot()
        families: list[Metric] = []
        for name, documentation, field in REQUEST_COUNTERS:
            family = CounterMetricFamily(name, documentation, labels=["api", "tenant"])
            for (api, tenant), tally in tallies:
                family.add_metric([api, tenant], getattr(tally, field))
            families.append(family)
        histogram = HistogramMetricFamily(LATENCY_NAME, LATENCY_HELP, labels=["api"])
        for api, latency in latencies:
            histogram.add_metric([api], _cumulative(latency), latency.sum)
        families.append(histogram)
        return families

    def render(self) -> str:
        """What ``generate_latest`` writes for ``collect``'s families (tested line by
        line), without building a sample object per value."""
        tallies, latencies = self._snapshot()
        out: list[str] = []
        labels = [f'api="{_label(api)}",tenant="{_label(tenant)}"' for (api, tenant), _ in tallies]
        for name, documentation, field in REQUEST_COUNTERS:
            total = f"{name}_total"
            out.append(f"# HELP {total} {documentation}\n# TYPE {total} counter\n")
            for label, (_key, tally) in zip(labels, tallies, strict=True):
                out.append(f"{total}{{{label}}} {sample_number(getattr(tally, field))}\n")
        out.append(f"# HELP {LATENCY_NAME} {LATENCY_HELP}\n# TYPE {LATENCY_NAME} histogram\n")
        for api, latency in latencies:
            label = f'api="{_label(api)}"'
            for bound, count in _cumulative(latency):
                out.append(
                    f'{LATENCY_NAME}_bucket{{{label},le="{bound}"}} {sample_number(count)}\n'
                )
            out.append(f"{LATENCY_NAME}_count{{{label}}} {sample_number(sum(latency.counts))}\n")
            out.append(f"{LATENCY_NAME}_sum{{{label}}} {sample_number(latency.sum)}\n")
        return "".join(out)


def _cumulative(latency: _Latency) -> list[tuple[str, float]]:
    running, buckets = 0, []
    for bound, count in zip(_BOUNDS, latency.counts, strict=True):
        running += count
        buckets.append((bound, float(running)))
    return buckets


class AccessLogCollector(Collector):
    """Access-log figures read at scrape time from ``stats()``."""

    def __init__(self, stats: Callable[[], Mapping[str, SinkStats]]) -> None:
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        written = CounterMetricFamily(
            "kgw_accesslog_written", "Access-log records written, per sink", labels=["sink"]
        )
        dropped = CounterMetricFamily(
            "kgw_accesslog_dropped",
            "Access-log records that could not be written, per sink and reason",
            labels=["sink", "reason"],
        )
        queued = GaugeMetricFamily(
            "kgw_accesslog_queued", "Access-log records waiting, per sink", labels=["sink"]
        )
        for sink, figures in self.stats().items():
            written.add_metric([sink], figures.written)
            queued.add_metric([sink], figures.queued)
            for reason, count in figures.dropped.items():
                dropped.add_metric([sink, reason], count)
        return [written, dropped, queued]


class GatewayMetrics:
    """Every metric the gateway exposes, and the calls that update them."""

    def __init__(self, registry: CollectorRegistry | None = None, max_tenants: int = 1000) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.max_tenants = max_tenants
        reg = self.registry
        self._tallies: dict[tuple[str, str], _Tally] = {}
        self._latencies: dict[str, _Latency] = {}
        # not in the registry: scrapes render it as text (``exposition``)
        self.request_series = RequestSeries(self._tallies, self._latencies)
        self.auth_failures = Counter(
            "kgw_authentication_failures",
            "Failed authentications (SASL, or a refused TLS client certificate)",
            ["listener", "mechanism"],
            registry=reg,
        )
        self.connections = Counter(
            "kgw_connections", "Client connections accepted", ["listener"], registry=reg
        )
        self.open_connections = Gauge(
            "kgw_open_connections", "Client connections open now", ["listener"], registry=reg
        )
        self.upstream_errors = Counter(
            "kgw_upstream_errors",
            "Failures talking to brokers (connect, closed, protocol, metadata refresh)",
            ["kind"],
            registry=reg,
        )
        self._tenants: set[str] = set()

    def watch_access_log(self, stats: Callable[[], Mapping[str, SinkStats]]) -> None:
        """Expose the access log's written/dropped/queued counts (read at scrape time)."""
        self.registry.register(AccessLogCollector(stats))

    def _tenant(self, tenant: str | None) -> str:
        name = tenant or UNKNOWN_TENANT
        if name in self._tenants:
            return name
        if len(self._tenants) >= self.max_tenants:
            return OTHER_TENANT
        self._tenants.add(name)
        return name

    def _tally(self, api: str, tenant: str | None) -> _Tally:
        key = (api, self._tenant(tenant))
        tally = self._tallies.get(key)
        if tally is None:
            latency = self._latencies.get(api)
            if latency is None:
                latency = self._latencies[api] = _Latency()
            tally = self._tallies[key] = _Tally(latency)
        return tally

    def observe(
        self,
        api: str,
        tenant: str | None,
        *,
        decision: str = "none",
        error_code: int = 0,
        bytes_in: int = 0,
        bytes_out: int = 0,
        records: int | None = None,
        throttle_ms: int = 0,
        latency_ms: float = 0.0,
    ) -> None:
        """One request/response pair."""
        self._count(api, tenant, decision, error_code, bytes_in, bytes_out, records,
                    throttle_ms, latency_ms)  # fmt: skip

    def observe_exchange(self, exchange: Exchange, tenant: str | None) -> None:
        """One finished request of a connection whose tenant is ``tenant`` (the data
        path's call: its values go to ``_count`` as they are, positionally)."""
        x = exchange
        self._count(api_key_map.get(x.api_key, UNKNOWN_API), tenant, x.decision, x.error_code,
                    x.bytes_in, x.bytes_out, x.records, x.throttle_ms, x.latency_ms)  # fmt: skip

    def _count(
        self,
        api: str,
        tenant: str | None,
        decision: str,
        error_code: int,
        bytes_in: int,
        bytes_out: int,
        records: int | None,
        throttle_ms: int,
        latency_ms: float,
    ) -> None:
        tally = self._tally(api, tenant)
        tally.requests += 1
        if error_code:
            tally.errors += 1
        if decision in DENIED:
            tally.denied += 1
        tally.bytes_in += bytes_in
        tally.bytes_out += bytes_out
        if records:
            tally.records += records
        if throttle_ms:
            tally.throttle_s += throttle_ms / 1000.0
        seconds = latency_ms / 1000.0
        latency = tally.latency
        latency.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        latency.sum += seconds

    def connection_opened(self, listener: str) -> None:
        self.connections.labels(listener=listener).inc()
        self.open_connections.labels(listener=listener).inc()

    def connection_closed(self, listener: str) -> None:
        self.open_connections.labels(listener=listener).dec()

    def auth_failed(self, listener: str, mechanism: str | None) -> None:
        self.auth_failures.labels(listener=listener, mechanism=mechanism or "none").inc()

    def upstream_error(self, kind: str) -> None:
        """``kind``: ``connect``, ``closed``, ``protocol`` or ``metadata``."""
        self.upstream_errors.labels(kind=kind).inc()

    def exposition(self) -> bytes:
        """Every series in Prometheus' text format."""
        return generate_latest(self.registry) + self.request_series.render().encode()

    def sample_value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample's value, as ``CollectorRegistry.get_sample_value`` finds it (None:
        no such sample), the per-request series included (tests, tools)."""
        found = self.registry.get_sample_value(name, dict(labels or {}))
        if found is not None:
            return found
        for family in self.request_series.collect():
            for sample in family.samples:
                if sample.name == name and sample.labels == dict(labels or {}):
                    return float(sample.value)
        return None
