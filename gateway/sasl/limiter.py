"""Slowing down repeated authentication failures, keyed by client address and by
claimed principal. Pure logic with an injected clock.

The session records every failed attempt under both keys (``address_key`` and
``principal_key``) and waits ``delay(...)`` seconds before it answers an attempt
(the failure response, and a new attempt on a key that is already penalised).
Below ``max_failures`` failures within ``window_s`` the delay is 0; from then on
it doubles with every further failure, from ``base_delay_s`` up to
``max_delay_s``. Failures age out of the window; a success does not reset the
count (an attacker could otherwise reset a victim's counter by interleaving a
login of their own). At most ``max_keys`` keys are tracked: the least recently
touched is forgotten first, so a flood of addresses costs bounded memory.

Lockout (optional, per kind of key): once an address has ``lockout_address_failures``
failures within ``window_s`` (or a claimed principal ``lockout_principal_failures``),
``record_failure`` locks that key for ``lockout_s`` and returns it; while
``locked_out(...)`` names a key, the session refuses the attempt without checking the
secret. Refusals during a lockout are not failures: they do not extend it. 0 turns a
kind off. A principal lockout lets anyone who knows a name lock its owner out, so it
is off by default (docs/sasl.md).

Sharing (``shared_failures.py``): ``observer`` is told the keys of every counted
failure, and ``absorb(key, total)`` takes the count other workers and gateway
instances report for a key within the window. The absorbed surplus is counted as
failures seen now (it ages out a window later: strict by at most the time the report
took), and it locks a key out as its own failures would.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

Clock = Callable[[], float]
Observer = Callable[[tuple[str, ...]], None]


_ADDRESS = "addr:"
_PRINCIPAL = "principal:"


def address_key(host: str) -> str:
    return f"{_ADDRESS}{host}"


def principal_key(claimed: str) -> str:
    return f"{_PRINCIPAL}{claimed}"


class FailureLimiter:
    def __init__(
        self,
        *,
        max_failures: int = 5,
        window_s: float = 60.0,
        base_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        max_keys: int = 100_000,
        lockout_address_failures: int = 0,
        lockout_principal_failures: int = 0,
        lockout_s: float = 300.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or base_delay_s < 0 or max_keys < 1:
            raise ValueError("max_failures ≥ 1, window_s > 0, base_delay_s ≥ 0, max_keys ≥ 1")
        if max_delay_s < base_delay_s:
            raise ValueError("max_delay_s must be at least base_delay_s")
        if min(lockout_address_failures, lockout_principal_failures) < 0 or lockout_s <= 0:
            raise ValueError("lockout failures ≥ 0 (0: off), lockout_s > 0")
        self.max_failures = max_failures
        self.window_s = window_s
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.max_keys = max_keys
        self.lockout_s = lockout_s
        self._lockout_at = {
            _ADDRESS: lockout_address_failures,
            _PRINCIPAL: lockout_principal_failures,
        }
        # a key never needs more entries than it takes to reach max_delay_s or a lockout
        self._keep = max(max_failures + 64, lockout_address_failures, lockout_principal_failures)
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._locked: OrderedDict[str, float] = OrderedDict()  # key → locked until
        self.observer: Observer | None = None  # told the keys of every counted failure

    def record_failure(self, *keys: str) -> list[str]:
        """Count a failure under each key; the keys this failure locked out."""
        now = self._clock()
        locked = [key for key in keys if self._count(key, 1, now)]
        self._bound()
        if self.observer is not None and keys:
            self.observer(keys)
        return locked

    def absorb(self, key: str, total: int) -> bool:
        """Take ``total``, the failures every instance saw under ``key`` within the
        window; whether that locked the key out. Never lowers the count."""
        now = self._clock()
        times = self._failures.get(key)
        surplus = total - (len(self._pruned(times, now)) if times is not None else 0)
        if surplus <= 0:
            return False
        locked = self._count(key, min(surplus, self._keep), now)
        self._bound()
        return locked

    def _count(self, key: str, failures: int, now: float) -> bool:
        """Add ``failures`` at ``now`` under ``key``; whether that locked it out."""
        times = self._failures.pop(key, None)
        if times is None:
            times = deque()
        self._prune(times, now)
        times.extend([now] * failures)
        while len(times) > self._keep:
            times.popleft()
        self._failures[key] = times  # most recently touched last
        threshold = self._threshold(key)
        if threshold and len(times) >= threshold and not self.locked_out(key):
            self._locked[key] = now + self.lockout_s
            return True
        return False

    def _bound(self) -> None:
        while len(self._failures) > self.max_keys:
            self._failures.popitem(last=False)
        while len(self._locked) > self.max_keys:
            self._locked.popitem(last=False)

    def failed(self, *keys: str, refused: bool = False) -> tuple[float, list[str]]:
        """A failed attempt under ``keys``: the delay before it is answered and the keys
        it locked out. A ``refused`` attempt (a lockout refusal) is not counted and
        waits at least ``base_delay_s``, so a locked client cannot spin."""
        if refused:
            return max(self.base_delay_s, self.delay(*keys)), []
        locked = self.record_failure(*keys)
        return self.delay(*keys), locked

    def locked_out(self, *keys: str) -> bool:
        """Whether any of ``keys`` is locked out now."""
        now = self._clock()
        for key in keys:
            until = self._locked.get(key)
            if until is None:
                continue
            if until > now:
                return True
            del self._locked[key]
        return False

    def _threshold(self, key: str) -> int:
        for prefix, threshold in self._lockout_at.items():
            if key.startswith(prefix):
                return threshold
        return 0

    def failures(self, key: str) -> int:
        times = self._failures.get(key)
        if times is None:
            return 0
        self._prune(times, self._clock())
        if not times:
            del self._failures[key]
            return 0
        return len(times)

    def delay_for(self, key: str) -> float:
        """Seconds to wait before answering an attempt under ``key``."""
        excess = self.failures(key) - self.max_failures
        if excess < 0:
            return 0.0
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** min(excess, 64))

    def delay(self, *keys: str) -> float:
        """The longest delay of several keys (address and principal)."""
        return max((self.delay_for(key) for key in keys), default=0.0)

    def reset(self, key: str) -> None:
        self._failures.pop(key, None)
        self._locked.pop(key, None)

    def __len__(self) -> int:
        return len(self._failures)

    def _prune(self, times: deque[float], now: float) -> None:
        horizon = now - self.window_s
        while times and times[0] <= horizon:
            times.popleft()

    def _pruned(self, times: deque[float], now: float) -> deque[float]:
        self._prune(times, now)
        return times
