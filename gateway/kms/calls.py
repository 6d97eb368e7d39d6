"""Key manager calls off the event loop: a small bounded pool of threads, and one call
in flight per key (single flight), so that a burst of connections needing the same
DEK asks the HSM once.

A PKCS#11 session is used by one thread at a time: the backend is called under a lock,
whatever the pool's size. The bookkeeping of calls in flight is touched only by the
thread that submits (the event loop's); the pool's threads only run the calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class KmsCalls:
    def __init__(self, threads: int = 1) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kgw-kms")
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, Future[Any]] = {}
        self.submitted = 0  # calls made (tests, metrics)

    def submit(self, key: Hashable, call: Callable[[], T]) -> Future[T]:
        """The call in flight for ``key``, or a new one running ``call`` in the pool."""
        found = self._inflight.get(key)
        if found is not None:
            return found
        future = self._pool.submit(self._locked, call)
        self._inflight[key] = future
        self.submitted += 1
        return future

    def forget(self, key: Hashable) -> None:
        """``key``'s call is done and its result taken: the next ``submit`` calls again."""
        self._inflight.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _locked(self, call: Callable[[], T]) -> T:
        with self._lock:
            return call()
