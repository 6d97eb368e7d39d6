"""Token-bucket arithmetic with an injected clock; no I/O.

A bucket holds up to ``burst`` tokens and refills at ``rate`` per second. A charge
always succeeds and may take the bucket below zero (Kafka: a request is never
refused for a byte or request quota); the throttle is then the time the refill
needs to pay the deficit back, ``deficit / rate``, capped at ``max_throttle_ms``.
The deficit never exceeds what the cap can express (``floor = -rate * cap``), so a
subject that stops misbehaving is never punished for longer than the cap.

``TokenBucket`` is a bucket this process owns alone. ``LeasedBucket`` is this
process's view of a bucket kept in Redis and shared by every instance: it spends
a lease (tokens reserved for this instance), then runs up a debt that the next
sync reports; the throttle counts the shared bucket's last known level as well,
so every instance throttles for the same shared deficit. ``GlobalBucket`` is the
reference model of the Redis script (``redis_sync.TAKE_LUA``), used by tests.
"""

from __future__ import annotations


def throttle_ms(deficit: float, rate: float, cap_ms: float) -> float:
    """Kafka's throttle: how long the refill needs to pay ``deficit`` back, capped."""
    if deficit <= 0:
        return 0.0
    return min(cap_ms, deficit / rate * 1000.0)


def floor_for(rate: float, cap_ms: float) -> float:
    """The lowest level a bucket may reach: the deficit the throttle cap can express."""
    return -rate * cap_ms / 1000.0


class TokenBucket:
    __slots__ = ("burst", "floor", "rate", "tokens", "updated")

    def __init__(
        self, rate: float, burst: float, now: float, floor: float, tokens: float | None = None
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.floor = floor
        self.tokens = burst if tokens is None else tokens
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def charge(self, amount: float, now: float) -> float:
        """Take ``amount`` (always); the deficit it leaves, 0 when none."""
        self._refill(now)
        self.tokens = max(self.floor, self.tokens - amount)
        return -self.tokens if self.tokens < 0 else 0.0

    def deficit(self, now: float) -> float:
        self._refill(now)
        return -self.tokens if self.tokens < 0 else 0.0

    def try_take(self, amount: float, now: float) -> bool:
        """Take ``amount`` only if the bucket holds it (connection rates refuse, not delay)."""
        self._refill(now)
        if self.tokens < amount:
            return False
        self.tokens -= amount
        return True

    def reconfigure(self, rate: float, burst: float, floor: float) -> None:
        self.rate, self.burst, self.floor = rate, burst, floor
        self.tokens = max(floor, min(self.tokens, burst))


class LeasedBucket:
    """This instance's view of one shared bucket.

    ``lease`` is what this instance may still spend without asking (negative: a
    debt not yet reported); ``seen`` is the shared bucket's level after the last
    sync, at ``seen_at``. Before the first sync the shared bucket is assumed full.
    Beyond its lease an instance spends at most ``1/share`` of the tokens it
    believes the shared bucket holds (``share``: the expected number of instances),
    so instances that all see a full bucket do not all spend all of it.
    """

    __slots__ = (
        "burst",
        "chunk",
        "floor",
        "lease",
        "rate",
        "seen",
        "seen_at",
        "share",
        "used_at",
    )

    def __init__(
        self, rate: float, burst: float, floor: float, chunk: float, now: float, share: int = 1
    ) -> None:
        self.rate, self.burst, self.floor, self.chunk = rate, burst, floor, chunk
        self.share = share
        self.lease = 0.0
        self.seen = burst
        self.seen_at = now
        self.used_at = now

    def available(self, now: float) -> float:
        """The shared bucket's level now, as far as this instance can tell."""
        return min(self.burst, self.seen + self.rate * max(0.0, now - self.seen_at))

    def charge(self, amount: float, now: float) -> float:
        self.lease -= amount
        self.used_at = now
        return self.deficit(now)

    def deficit(self, now: float) -> float:
        # A lease in hand is prepaid; none at all (0, e.g. right after a debt was
        # reported) leaves the shared bucket's own deficit, which still counts.
        if self.lease > 0:
            return 0.0
        available = self.available(now)
        if available > 0:
            available /= self.share
        short = -self.lease - available
        return min(short, -self.floor) if short > 0 else 0.0

    def needs_sync(self) -> bool:
        """The lease is below half a chunk (or in debt): time to top it up."""
        return self.lease < self.chunk / 2

    def sync_request(self, *, release: bool = False) -> tuple[float, float]:
        """``(debit, want)`` for the next sync: report the debt, top the lease up to a
        chunk. ``release``: hand the whole lease back (a negative debit)."""
        if release:
            return -self.lease, 0.0
        debit = -self.lease if self.lease < 0 else 0.0
        held = max(self.lease, 0.0)
        want = self.chunk - held if held < self.chunk / 2 else 0.0
        return debit, want

    def synced(self, debit: float, grant: float, tokens: float, now: float) -> None:
        """Apply a sync's answer; charges made while it was in flight stay counted."""
        self.lease += debit + grant
        self.seen = tokens
        self.seen_at = now

    def reconfigure(self, rate: float, burst: float, floor: float, chunk: float) -> None:
        self.rate, self.burst, self.floor, self.chunk = rate, burst, floor, chunk
        self.lease = min(self.lease, chunk)


class GlobalBucket:
    """Reference model of the Redis script: what ``take`` does to the shared state."""

    def __init__(self, now: float) -> None:
        self.tokens: float | None = None
        self.updated = now

    def take(
        self,
        rate: float,
        burst: float,
        floor: float,
        debit: float,
        want: float,
        now: float,
    ) -> tuple[float, float]:
        if self.tokens is None:
            self.tokens, self.updated = burst, now
        tokens = self.tokens
        if now > self.updated:
            tokens = min(burst, tokens + (now - self.updated) * rate)
        tokens = min(burst, max(floor, tokens - debit))
        grant = min(want, tokens) if want > 0 and tokens > 0 else 0.0
        tokens -= grant
        self.tokens, self.updated = tokens, max(now, self.updated)
        return grant, tokens
