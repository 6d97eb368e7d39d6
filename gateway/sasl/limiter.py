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
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

Clock = Callable[[], float]


def address_key(host: str) -> str:
    return f"addr:{host}"


def principal_key(claimed: str) -> str:
    return f"principal:{claimed}"


class FailureLimiter:
    def __init__(
        self,
        *,
        max_failures: int = 5,
        window_s: float = 60.0,
        base_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        max_keys: int = 100_000,
        clock: Clock = time.monotonic,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or base_delay_s < 0 or max_keys < 1:
            raise ValueError("max_failures ≥ 1, window_s > 0, base_delay_s ≥ 0, max_keys ≥ 1")
        if max_delay_s < base_delay_s:
            raise ValueError("max_delay_s must be at least base_delay_s")
        self.max_failures = max_failures
        self.window_s = window_s
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.max_keys = max_keys
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def record_failure(self, *keys: str) -> None:
        now = self._clock()
        for key in keys:
            times = self._failures.pop(key, None)
            if times is None:
                times = deque()
            self._prune(times, now)
            times.append(now)
            # a key cannot need more entries than it takes to reach max_delay_s
            while len(times) > self.max_failures + 64:
                times.popleft()
            self._failures[key] = times  # most recently touched last
        while len(self._failures) > self.max_keys:
            self._failures.popitem(last=False)

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

    def __len__(self) -> int:
        return len(self._failures)

    def _prune(self, times: deque[float], now: float) -> None:
        horizon = now - self.window_s
        while times and times[0] <= horizon:
            times.popleft()
