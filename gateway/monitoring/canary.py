"""The canary's bookkeeping: sequences, latency, availability, loss, duplicates. No I/O.

The canary loop (``canary_loop.py``) produces one sequenced record per partition per
round through a public listener and fetches them back; it reports each outcome here.
A record's value is ``kgw-canary/1 <run> <partition> <seq>``: ``run`` is random per
process, so records of an earlier run or another gateway instance are ignored.

- availability: successful produce and fetch attempts over all attempts in the last
  ``window_s`` (a killed broker's partitions fail until leadership moves: a dip);
- latency: from the produce call to the record being fetched back, percentiles over
  the window;
- lost: an acknowledged record not fetched back within ``lost_after_s``;
- duplicated: a record fetched back a second time (at another offset).
"""

from __future__ import annotations

import math
import secrets
from collections import OrderedDict, deque
from dataclasses import dataclass

PREFIX = b"kgw-canary/1"
SEEN_PER_PARTITION = 10_000  # fetched sequences remembered, per partition, for duplicates


@dataclass(frozen=True, slots=True)
class CanaryStats:
    """Counters since start and the window's figures."""

    produced: int
    produce_errors: int
    fetched: int
    fetch_errors: int
    lost: int
    duplicated: int
    pending: int
    availability: float  # NaN before the first attempt
    latency_quantiles: dict[float, float]  # quantile → seconds (NaN: no sample)


def encode_value(run: str, partition: int, seq: int) -> bytes:
    return b"%s %s %d %d" % (PREFIX, run.encode("ascii"), partition, seq)


def decode_value(value: bytes | None) -> tuple[str, int, int] | None:
    """``(run, partition, seq)`` of a canary value, else ``None``."""
    if value is None or not value.startswith(PREFIX + b" "):
        return None
    parts = value.split(b" ")
    if len(parts) != 4:
        return None
    try:
        return parts[1].decode("ascii"), int(parts[2]), int(parts[3])
    except (UnicodeDecodeError, ValueError):
        return None


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class CanaryBook:
    """What the canary sent, what came back, and the figures derived from both."""

    QUANTILES = (0.5, 0.95, 0.99, 1.0)

    def __init__(
        self, window_s: float = 60.0, lost_after_s: float = 30.0, run: str | None = None
    ) -> None:
        self.window_s = window_s
        self.lost_after_s = lost_after_s
        self.run = run or secrets.token_hex(6)
        self._next: dict[int, int] = {}
        self._pending: dict[tuple[int, int], float] = {}  # acknowledged, not fetched yet
        self._seen: dict[int, OrderedDict[int, None]] = {}
        self._attempts: deque[tuple[float, bool]] = deque()
        self._latencies: deque[tuple[float, float]] = deque()
        self.produced = self.produce_errors = self.fetched = self.fetch_errors = 0
        self.lost = self.duplicated = 0

    def next_record(self, partition: int) -> tuple[int, bytes]:
        """The next sequence number for ``partition`` and the value carrying it."""
        seq = self._next.get(partition, 0)
        self._next[partition] = seq + 1
        return seq, encode_value(self.run, partition, seq)

    def produced_ok(self, partition: int, seq: int, sent_at: float, now: float) -> None:
        self.produced += 1
        self._pending[(partition, seq)] = sent_at
        self._attempt(now, True)

    def produce_failed(self, now: float) -> None:
        self.produce_errors += 1
        self._attempt(now, False)

    def fetch_ok(self, now: float) -> None:
        self._attempt(now, True)

    def fetch_failed(self, now: float) -> None:
        self.fetch_errors += 1
        self._attempt(now, False)

    def received(self, value: bytes | None, now: float) -> None:
        """A record fetched back from the canary topic."""
        decoded = decode_value(value)
        if decoded is None or decoded[0] != self.run:
            return
        _, partition, seq = decoded
        seen = self._seen.setdefault(partition, OrderedDict())
        if seq in seen:
            self.duplicated += 1
            return
        seen[seq] = None
        if len(seen) > SEEN_PER_PARTITION:
            seen.popitem(last=False)
        self.fetched += 1
        sent_at = self._pending.pop((partition, seq), None)
        if sent_at is not None:
            self._latencies.append((now, max(0.0, now - sent_at)))

    def expire(self, now: float) -> int:
        """Count acknowledged records not fetched back within ``lost_after_s`` as lost."""
        overdue = [key for key, sent in self._pending.items() if now - sent > self.lost_after_s]
        for key in overdue:
            del self._pending[key]
        self.lost += len(overdue)
        return len(overdue)

    def _attempt(self, now: float, ok: bool) -> None:
        self._attempts.append((now, ok))

    def _prune(self, now: float) -> None:
        cutoff = now - self.window_s
        while self._attempts and self._attempts[0][0] < cutoff:
            self._attempts.popleft()
        while self._latencies and self._latencies[0][0] < cutoff:
            self._latencies.popleft()

    def stats(self, now: float) -> CanaryStats:
        self._prune(now)
        attempts = len(self._attempts)
        good = sum(1 for _, ok in self._attempts if ok)
        latencies = [latency for _, latency in self._latencies]
        return CanaryStats(
            produced=self.produced,
            produce_errors=self.produce_errors,
            fetched=self.fetched,
            fetch_errors=self.fetch_errors,
            lost=self.lost,
            duplicated=self.duplicated,
            pending=len(self._pending),
            availability=good / attempts if attempts else math.nan,
            latency_quantiles={q: quantile(latencies, q) for q in self.QUANTILES},
        )
