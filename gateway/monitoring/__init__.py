"""Service monitoring: cluster health, per-tenant consumer lag, an end-to-end canary.

| module | concern | I/O |
| --- | --- | --- |
| ``settings`` | the ``monitoring`` configuration section | none |
| ``tenancy`` | tenant labels of topics and groups (bounded) | none |
| ``health`` | cluster health from metadata and log-dir sizes | none |
| ``lag`` | lag per partition and group, consume rate, time to catch up | none |
| ``canary`` | the canary's bookkeeping: sequences, latency, loss, duplicates | none |
| ``state`` | the latest figures, shared by loops and collector | none |
| ``collector`` | the figures as Prometheus metrics at scrape time | none |
| ``status`` | ``kgw status``: figures read back from ``/metrics``, one screen | none |
| ``probes`` | the loops' requests through ``BrokerClient`` | asyncio |
| ``loops`` | the health and lag loops | asyncio |
| ``canary_loop`` | the canary client through a public listener | asyncio |
| ``service`` | wiring: collector and loops, started by the supervisor | asyncio |
"""

from __future__ import annotations

from .settings import MonitoringConfig

__all__ = ["MonitoringConfig"]
