"""The latest monitoring figures, shared by the loops (writers) and the collector (reader).

No I/O. The loops replace whole snapshots; the collector reads them at scrape time, so a
scrape never waits for a broker and never sees half a round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .canary import CanaryBook
from .health import ClusterHealth
from .lag import GroupLag

LOOPS = ("health", "lag", "canary")


@dataclass(slots=True)
class MonitoringState:
    """Latest snapshots and per-loop bookkeeping."""

    health: ClusterHealth | None = None
    lag: list[GroupLag] = field(default_factory=list)
    tenant_lag: dict[str, int] = field(default_factory=dict)
    thresholds: dict[str, int] = field(default_factory=dict)  # tenant label → records
    canary: CanaryBook | None = None
    canary_tenant: str = "kgw-canary"
    canary_sla: float = 0.999
    partition_metrics: bool = False
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOOPS, 0))
    last_success: dict[str, float] = field(default_factory=dict)  # unix time

    def succeeded(self, loop: str, now: float | None = None) -> None:
        self.last_success[loop] = time.time() if now is None else now

    def failed(self, loop: str) -> None:
        self.errors[loop] = self.errors.get(loop, 0) + 1
