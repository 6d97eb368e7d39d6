"""Metrics and health: a Prometheus registry and the HTTP endpoint that serves it.

| module | concern | I/O |
| --- | --- | --- |
| ``settings`` | the ``metrics`` configuration section | none |
| ``metrics`` | ``GatewayMetrics``: the registry and the calls that update it | none |
| ``observer`` | ``ConnectionObserver``: one connection's records and metrics | none |
| ``endpoint`` | ``/metrics``, ``/healthz``, ``/readyz`` over a tiny HTTP/1.1 server | asyncio |
"""

from __future__ import annotations

from .endpoint import ObservabilityServer, ReadyChecks
from .metrics import GatewayMetrics
from .observer import ConnectionObserver
from .settings import MetricsConfig

__all__ = [
    "ConnectionObserver",
    "GatewayMetrics",
    "MetricsConfig",
    "ObservabilityServer",
    "ReadyChecks",
    "serve",
]


def serve(
    config: MetricsConfig, metrics: GatewayMetrics, checks: ReadyChecks
) -> ObservabilityServer:
    """The endpoint for ``config`` (call ``await server.start()``, later ``close()``)."""
    return ObservabilityServer(config.bind_host, config.port, metrics.exposition, checks)
