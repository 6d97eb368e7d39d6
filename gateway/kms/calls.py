"""Key manager calls off the event loop: a small bounded pool of threads, and one call
in flight per key (single flight), so that a burst of connections needing the same
DEK asks the HSM once.

A PKCS#11 session is used by one thread at a time: the backend is called under a lock,
whatever the pool's size. The bookkeeping of calls in flight is touched only by the
thread that submits (the event loop's); the pool's threads only run the calls.

At most ``max_pending`` calls wait or run at once (abandoned ones included: a call that
timed out keeps its place until the pool has run it): beyond that ``submit`` refuses
with ``KmsUnavailable``, so a hung HSM and a stream of new keys cannot grow the pool's
queue without bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .api import KmsUnavailable

T = TypeVar("T")
MAX_PENDING = 256
# A finished call's result waits this long for the request that wants it (a client
# retrying after its empty answer); older, it is dropped and the key manager asked
# again, so that a key destroyed or disabled meanwhile is not used from an old answer.
RESULT_TTL_S = 5.0


class KmsCalls:
    def __init__(
        self,
        threads: int = 1,
        max_pending: int = MAX_PENDING,
        result_ttl_s: float = RESULT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kgw-kms")
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, Future[Any]] = {}
        self.max_pending = max_pending
        self._pending = 0  # submitted and not done (counted under _count_lock)
        self._count_lock = threading.Lock()
        self.submitted = 0  # calls made (tests, metrics)
        self.refused = 0  # calls refused because max_pending were waiting
        self.result_ttl_s = result_ttl_s
        self._clock = clock
        self._finished: dict[int, float] = {}  # id(future) -> when it finished

    def submit(self, key: Hashable, call: Callable[[], T]) -> Future[T]:
        """The call in flight for ``key``, or a new one running ``call`` in the pool;
        ``KmsUnavailable`` when ``max_pending`` calls are waiting or running already."""
        found = self._inflight.get(key)
        if found is not None:
            if not self._stale(found):
                return found
            self.forget(key)  # nobody came for it in time: ask again
        if len(self._inflight) > self.max_pending:
            self._sweep()
        with self._count_lock:
            if self._pending >= self.max_pending:
                self.refused += 1
                raise KmsUnavailable(
                    f"{self._pending} key manager calls are waiting; not queueing more"
                )
            self._pending += 1
        future = self._pool.submit(self._locked, call)
        future.add_done_callback(self._done)
        self._inflight[key] = future
        self.submitted += 1
        return future

    @property
    def pending(self) -> int:
        return self._pending

    def _done(self, future: Future[Any]) -> None:
        with self._count_lock:
            self._pending -= 1
            self._finished[id(future)] = self._clock()

    def _stale(self, future: Future[Any]) -> bool:
        with self._count_lock:
            done_at = self._finished.get(id(future))
        return done_at is not None and self._clock() - done_at > self.result_ttl_s

    def _sweep(self) -> None:
        """Drop finished calls nobody came for in time (their clients went away)."""
        for key in [k for k, f in self._inflight.items() if self._stale(f)]:
            self.forget(key)

    def forget(self, key: Hashable) -> None:
        """``key``'s call is done and its result taken: the next ``submit`` calls again."""
        future = self._inflight.pop(key, None)
        if future is not None:
            with self._count_lock:
                self._finished.pop(id(future), None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _locked(self, call: Callable[[], T]) -> T:
        with self._lock:
            return call()
