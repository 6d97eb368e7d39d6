"""DEKs in memory: the one each KEK currently encrypts with (renewed after
``max_age_seconds`` or ``max_uses`` records), and the unwrapped DEKs decryption has
recently needed (kept ``decrypt_cache_seconds``, at most ``decrypt_cache_entries``).

The key manager is called only when a DEK must be made or unwrapped; while it is
unreachable, a cached DEK keeps serving until its bounds are reached, then the call
fails with the key manager's error. Time comes from ``clock`` (tests drive it).

With ``calls`` (``kms.calls.KmsCalls``) the key manager is never called on the
caller's thread: a miss starts the call in the pool (one per key, however many ask)
and raises ``DekPending``; the caller waits for ``DekPending.wait()`` off its data
path and asks again. A call that failed is remembered for ``FAILURE_MEMORY_S`` (the
waiters of the same call get the same error; an HSM that is down is not asked again
by every connection), and one that takes longer than ``kms_timeout_seconds`` fails
as unavailable. Without ``calls`` (the CLI, tests) the call is made inline.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..kms.api import DEK_SIZE, Kms, KmsError, KmsUnavailable, WrappedDek
from ..kms.calls import KmsCalls
from .envelope import KeyRef
from .settings import DekConfig

T = TypeVar("T")
FAILURE_MEMORY_S = 1.0
STARTED_MAX = 10_000


class DekPending(Exception):
    """The DEK needs a key manager call that is running: wait, then ask again."""

    def __init__(self, future: Future[Any], seconds: float) -> None:
        super().__init__("a key manager call is in flight")
        self.future = future
        self.seconds = seconds  # the longest the caller should wait before asking again

    async def wait(self) -> None:
        """Until the call is done or ``seconds`` have passed; never raises its error
        (the DEK cache reports it when asked again)."""
        waiter = asyncio.wrap_future(self.future)
        waiter.add_done_callback(_seen)  # no "exception was never retrieved" noise
        await asyncio.wait({waiter}, timeout=self.seconds)


def _seen(waiter: asyncio.Future[Any]) -> None:
    if not waiter.cancelled():
        waiter.exception()


@dataclass(slots=True)
class _Current:
    ref: KeyRef
    aead: AESGCM
    made: float
    uses: int


class DekCache:
    def __init__(
        self,
        kms: Kms,
        config: DekConfig,
        clock: Callable[[], float] = time.monotonic,
        calls: KmsCalls | None = None,
    ) -> None:
        self.kms = kms
        self.config = config
        self.clock = clock
        self.calls = calls
        # calls in flight: the call, and when this cache first asked for it
        self._started: dict[Hashable, tuple[Future[Any], float]] = {}
        self._failed: dict[Hashable, tuple[KmsError, float]] = {}
        self._current: dict[str, _Current] = {}
        self._opened: OrderedDict[tuple[str, int, bytes], tuple[AESGCM, float]] = OrderedDict()
        self.made = 0  # DEKs made (metrics, tests)
        self.unwrapped = 0

    def encryptor(self, kek: str, records: int, inline: bool = False) -> tuple[KeyRef, AESGCM]:
        """The DEK to encrypt ``records`` records under ``kek`` with; a new one when the
        current one is too old or would exceed its uses (raises ``KmsError``, or
        ``DekPending``). ``inline``: a new one is made on this thread — for a request
        that needs a second new DEK (more records than ``max_uses``): waiting and
        starting again would use up each new DEK on its first records, for ever."""
        now = self.clock()
        current = self._current.get(kek)
        if (
            current is None
            or now - current.made >= self.config.max_age_seconds
            or current.uses + records > self.config.max_uses
        ):
            self._current.pop(kek, None)
            fresh: WrappedDek = (
                self.kms.new_dek(kek)
                if inline
                else self._call(("new", kek), lambda: self.kms.new_dek(kek), now)
            )
            self.made += 1
            ref = KeyRef(kek, fresh.version, fresh.wrapped)
            current = _Current(ref, AESGCM(fresh.dek), now, 0)
            self._current[kek] = current
            self._remember((kek, fresh.version, fresh.wrapped), current.aead, now)
        current.uses += records
        return current.ref, current.aead

    def decryptor(self, ref: KeyRef) -> AESGCM:
        """The DEK ``ref`` names, unwrapped by the key manager unless recently seen."""
        now = self.clock()
        key = (ref.kek, ref.version, ref.wrapped)
        found = self._opened.get(key)
        if found is not None:
            aead, since = found
            if now - since < self.config.decrypt_cache_seconds:
                self._opened.move_to_end(key)
                return aead
            del self._opened[key]
        dek: bytes = self._call(
            ("unwrap", *key), lambda: self.kms.unwrap(ref.kek, ref.version, ref.wrapped), now
        )
        if len(dek) != DEK_SIZE:  # the gateway wraps AES-256 keys only
            raise KmsError(f"KEK {ref.kek!r} v{ref.version} unwrapped a key of the wrong size")
        aead = AESGCM(dek)
        self.unwrapped += 1
        self._remember(key, aead, now)
        return aead

    def _call(self, key: Hashable, call: Callable[[], T], now: float) -> T:
        """``call``'s result: inline without ``calls``; else from the pool, raising
        ``DekPending`` while it runs (``KmsError`` when it failed or took too long)."""
        if self.calls is None:
            return call()
        failed = self._failed.get(key)
        if failed is not None:
            if now - failed[1] < FAILURE_MEMORY_S:
                raise failed[0]
            del self._failed[key]
        try:
            future = self.calls.submit(key, call)
        except KmsError as exc:  # too many calls waiting: refused like a failed call
            self._remember_failure(key, exc, now)
            raise
        begun = self._started.get(key)
        if begun is None or begun[0] is not future:  # a new call (an old one went stale)
            begun = self._started[key] = (future, now)
            if len(self._started) > STARTED_MAX:  # bounded: calls nobody came back for
                del self._started[next(iter(self._started))]
        started = begun[1]
        if not future.done():
            left = self.config.kms_timeout_seconds - (now - started)
            if left > 0:
                raise DekPending(future, left)
            error: KmsError = KmsUnavailable(
                f"the key manager did not answer within {self.config.kms_timeout_seconds:g}s"
            )
        else:
            try:
                result: T = future.result()
            except KmsError as exc:
                error = exc
            except CancelledError:
                error = KmsUnavailable("the key manager call was cancelled (stopping)")
            except Exception as exc:  # a backend bug: unavailable, its type only
                error = KmsUnavailable(f"the key manager call failed ({type(exc).__name__})")
            else:
                self.calls.forget(key)
                del self._started[key]
                return result
        self.calls.forget(key)  # a call still running is abandoned; the next asks again
        self._started.pop(key, None)
        self._remember_failure(key, error, now)
        raise error

    def _remember_failure(self, key: Hashable, error: KmsError, now: float) -> None:
        self._failed[key] = (error, now)
        if len(self._failed) > 1000:  # bounded: the oldest go first
            del self._failed[next(iter(self._failed))]

    def forget(self, kek: str) -> None:
        """Drop every DEK of ``kek`` (it was disabled or destroyed here)."""
        self._current.pop(kek, None)
        for key in [k for k in self._opened if k[0] == kek]:
            del self._opened[key]

    def __len__(self) -> int:
        return len(self._opened)

    def _remember(self, key: tuple[str, int, bytes], aead: AESGCM, now: float) -> None:
        if self.config.decrypt_cache_seconds <= 0:
            return
        self._opened[key] = (aead, now)
        self._opened.move_to_end(key)
        while len(self._opened) > self.config.decrypt_cache_entries:
            self._opened.popitem(last=False)
