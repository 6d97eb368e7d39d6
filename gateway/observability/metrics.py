"""The gateway's Prometheus metrics, in a registry of its own.

The data path calls a handful of cheap methods (``observe_exchange`` with the
finished exchange, ``connection_opened``/``_closed``,
``auth_failed``, ``upstream_error``); label children are cached so a request
costs a dict lookup and a few increments. Access-log counters are not pushed at
all: a collector reads ``AccessLog.stats()`` when Prometheus scrapes.

Label cardinality is bounded: ``api`` is one of kio's API names, ``tenant`` is
the record's tenant (``unknown`` before authentication names one) and the
``max_tenants``-th distinct tenant onwards is counted as ``other``. Latency is a
histogram per API only; per-tenant figures are counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..accesslog.writer import SinkStats
from ..protocol.apis import api_name

if TYPE_CHECKING:
    from ..accesslog.exchange import Exchange

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
UNKNOWN_TENANT = "unknown"
OTHER_TENANT = "other"
DENIED = frozenset({"deny", "partial"})


@dataclass(slots=True)
class _Children:
    """The label children of one (api, tenant) pair."""

    requests: Any
    errors: Any
    denied: Any
    bytes_in: Any
    bytes_out: Any
    records: Any
    throttle: Any
    latency: Any


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
        by_request = ["api", "tenant"]
        self.requests = Counter("kgw_requests", "Requests answered", by_request, registry=reg)
        self.request_errors = Counter(
            "kgw_request_errors", "Requests answered with an error code", by_request, registry=reg
        )
        self.denied = Counter(
            "kgw_denied_requests",
            "Requests denied by authorization, wholly or in part",
            by_request,
            registry=reg,
        )
        self.bytes_in = Counter(
            "kgw_request_bytes", "Request bytes from clients", by_request, registry=reg
        )
        self.bytes_out = Counter(
            "kgw_response_bytes", "Response bytes to clients", by_request, registry=reg
        )
        self.records = Counter(
            "kgw_records",
            "Records produced (Produce) and fetched (Fetch)",
            by_request,
            registry=reg,
        )
        self.throttle = Counter(
            "kgw_throttle_seconds", "Throttle time imposed by quotas", by_request, registry=reg
        )
        self.latency = Histogram(
            "kgw_request_latency_seconds",
            "From a request's arrival to its response leaving the gateway",
            ["api"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
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
        self._children: dict[tuple[str, str], _Children] = {}
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

    def _for(self, api: str, tenant: str | None) -> _Children:
        key = (api, self._tenant(tenant))
        children = self._children.get(key)
        if children is None:
            labels = {"api": key[0], "tenant": key[1]}
            children = self._children[key] = _Children(
                self.requests.labels(**labels),
                self.request_errors.labels(**labels),
                self.denied.labels(**labels),
                self.bytes_in.labels(**labels),
                self.bytes_out.labels(**labels),
                self.records.labels(**labels),
                self.throttle.labels(**labels),
                self.latency.labels(api=api),
            )
        return children

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
        children = self._for(api, tenant)
        children.requests.inc()
        if error_code:
            children.errors.inc()
        if decision in DENIED:
            children.denied.inc()
        children.bytes_in.inc(bytes_in)
        children.bytes_out.inc(bytes_out)
        if records:
            children.records.inc(records)
        if throttle_ms:
            children.throttle.inc(throttle_ms / 1000.0)
        children.latency.observe(latency_ms / 1000.0)

    def observe_exchange(self, exchange: Exchange, tenant: str | None) -> None:
        """One finished request of a connection whose tenant is ``tenant``."""
        self.observe(
            api_name(exchange.api_key),
            tenant,
            decision=exchange.decision,
            error_code=exchange.error_code,
            bytes_in=exchange.bytes_in,
            bytes_out=exchange.bytes_out,
            records=exchange.records,
            throttle_ms=exchange.throttle_ms,
            latency_ms=exchange.latency_ms,
        )

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
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)
