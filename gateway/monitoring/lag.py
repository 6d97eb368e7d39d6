"""Consumer lag and time to catch up: pure computations, no I/O.

Lag of a group on a partition is the partition's end offset (the high watermark
ListOffsets reports for ``latest``) minus the group's committed offset, as
``kafka-consumer-groups.sh --describe`` computes it; partitions the group never
committed to have no lag. The time to catch up follows the service design: the
lag divided by the rate the group consumes at, measured as the growth of its
committed offsets over the last ``rate_window_s``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class GroupLag:
    """One group's lag: per partition, in total, and how long catching up takes."""

    group: str
    tenant: str
    group_type: str  # "classic" or "consumer" (KIP-848)
    partitions: dict[TopicPartition, int] = field(default_factory=dict)
    committed: int = 0  # the sum of committed offsets (for the consume rate)
    consume_rate: float = 0.0  # records per second
    threshold: int = 0

    @property
    def total(self) -> int:
        return sum(self.partitions.values())

    @property
    def max_partition(self) -> int:
        return max(self.partitions.values(), default=0)

    @property
    def catch_up_s(self) -> float:
        return time_to_catch_up(self.total, self.consume_rate)


def time_to_catch_up(lag: int, rate: float) -> float:
    """Seconds to consume ``lag`` records at ``rate`` per second (+inf: not consuming)."""
    if lag <= 0:
        return 0.0
    return lag / rate if rate > 0 else math.inf


def partition_lag(
    committed: Mapping[TopicPartition, int], end_offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Lag per partition with a commit (negative offset: none) and a known end offset."""
    lags: dict[TopicPartition, int] = {}
    for tp, offset in committed.items():
        end = end_offsets.get(tp)
        if offset < 0 or end is None or end < 0:
            continue
        lags[tp] = max(0, end - offset)
    return lags


class RateTracker:
    """Consume rate per group from its committed offsets over a sliding window."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: dict[str, deque[tuple[float, int]]] = {}

    def observe(self, group: str, now: float, committed: int) -> float:
        """Record ``committed`` (sum over partitions) at ``now``; the rate in records/s."""
        samples = self._samples.setdefault(group, deque())
        if samples and committed < samples[-1][1]:
            samples.clear()  # offsets reset or partitions dropped: start over
        samples.append((now, committed))
        while len(samples) > 2 and samples[1][0] <= now - self.window_s:
            samples.popleft()
        first_t, first_c = samples[0]
        if now <= first_t:
            return 0.0
        return (committed - first_c) / (now - first_t)

    def forget_except(self, groups: set[str]) -> None:
        """Drop groups that no longer exist (the tracker stays bounded)."""
        for group in list(self._samples):
            if group not in groups:
                del self._samples[group]


def tenant_totals(groups: list[GroupLag]) -> dict[str, int]:
    """Total lag per tenant label."""
    totals: dict[str, int] = {}
    for lag in groups:
        totals[lag.tenant] = totals.get(lag.tenant, 0) + lag.total
    return totals
