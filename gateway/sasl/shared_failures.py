"""Failed logins shared by every worker and gateway instance, through Redis.

Each worker's ``FailureLimiter`` counts the failures it sees itself; this adds the
others'. The limiter's ``observer`` queues the keys of each counted failure; the
publisher counts each key in Redis (one counter per key and slice of the window,
expiring after it), reads the key's total within the window, and publishes it; every
instance, the publisher included, ``absorb``s the total. A client that spreads its
attempts over the workers of a host (SO_REUSEPORT picks one per connection) or over
several gateways is slowed down and locked out as if it had used one.

Pub/sub keeps nothing for a subscriber that is not connected, so the publisher also
notes each key, with the time, in a sorted set of the window's recent keys; a
subscriber that (re)subscribes first reads that set and the keys' totals (catch-up),
so a notice published while it was away is not lost.

Redis down or slow: every limiter keeps counting its own failures (the per-process
behaviour); a warning when sharing stops and a line when it is back. Counter names hold
a hash of the key; the notice and the recent-key set hold the key itself (an address or
a claimed principal, never a secret). The URL may hold a password: it never reaches a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import time
import uuid
from collections import deque
from typing import Any

from .limiter import FailureLimiter

log = logging.getLogger("kgw.sasl")
SLICES = 10  # counters per key and window: a failure ages out at most window/10 late
QUEUE_MAX = 10_000  # keys waiting to be counted; beyond, the oldest are not shared
KEY_MAX = 600  # longest key a notice may carry ("principal:" + a clipped claim)
RECENT_MAX = 10_000  # keys a catch-up reads (the most recent); the set is cut to this
RETRY_S = 1.0
KEY_KINDS = ("addr:", "principal:")


def notice(origin: str, key: str, total: int) -> str:
    return json.dumps({"origin": origin, "key": key, "total": total})


def read_notice(data: object) -> tuple[str, str, int] | None:
    """``(origin, key, total)`` of a well-formed notice, else None."""
    try:
        message = json.loads(data if isinstance(data, (str, bytes)) else b"")
        origin, key, total = message["origin"], message["key"], message["total"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(origin, str) and isinstance(key, str) and type(total) is int):
        return None
    if len(key) > KEY_MAX or not key.startswith(KEY_KINDS) or total < 0:
        return None
    return origin, key, total


class SharedFailures:
    """Shares ``limiter``'s failures through the Redis at ``url`` (``run`` until cancelled)."""

    def __init__(
        self,
        limiter: FailureLimiter,
        url: str,
        prefix: str = "kgw:authfail",
        timeout_s: float = 0.5,
    ) -> None:
        self.limiter = limiter
        self.url = url
        self.prefix = prefix
        self.channel = f"{prefix}:notices"
        self.recent = f"{prefix}:recent"
        self.timeout_s = timeout_s
        self.instance = uuid.uuid4().hex
        self.slice_s = limiter.window_s / SLICES
        self.subscribed = asyncio.Event()
        self.dropped = 0  # keys never shared because the queue was full
        self._queue: deque[str] = deque()
        self._wake = asyncio.Event()
        self._down: set[str] = set()  # "subscriber", "publisher": what is failing now
        limiter.observer = self._observe

    def _observe(self, keys: tuple[str, ...]) -> None:
        for key in keys:
            if len(self._queue) >= QUEUE_MAX:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append(key)
        self._wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._subscriber())
            group.create_task(self._publisher())

    # -- receiving ------------------------------------------------------------------

    async def _subscriber(self) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError

        while True:
            client: Any = aioredis.Redis.from_url(self.url, socket_connect_timeout=self.timeout_s)
            pubsub: Any = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async with asyncio.timeout(10 * self.timeout_s):
                    await self._catch_up(client)
                self.subscribed.set()
                self._up("subscriber")
                while True:
                    _unless_cancelled()  # redis-py may have swallowed a cancellation
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        self.receive(message.get("data"))
            except (RedisError, OSError, TimeoutError) as exc:
                _unless_cancelled(exc)
                self._failed("subscriber", exc)
            finally:
                self.subscribed.clear()
                await _quietly(pubsub.aclose())
                await _quietly(client.aclose())
            await asyncio.sleep(RETRY_S)

    def receive(self, data: object) -> None:
        """Absorb one notice (another instance's, or this one's own count)."""
        read = read_notice(data)
        if read is None:
            bad = {"event": "sasl_notice_bad"}
            log.warning("ignoring a malformed login-failure notice", extra=bad)
            return
        _origin, key, total = read
        self._absorb(key, total)

    def _absorb(self, key: str, total: int) -> None:
        if self.limiter.absorb(key, total):
            kind, _, name = key.partition(":")  # "addr:<host>" or "principal:<claimed>"
            log.warning(
                "SASL lockout after repeated failures counted by all workers and instances",
                extra={
                    "event": "sasl_lockout",
                    "reason": kind,
                    "host" if kind == "addr" else "principal": name,
                    "seconds": self.limiter.lockout_s,
                },
            )

    # -- counting and telling -------------------------------------------------------

    async def _publisher(self) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError

        client: Any = aioredis.Redis.from_url(
            self.url, socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s
        )
        try:
            while True:
                _unless_cancelled()  # redis-py may have swallowed a cancellation
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    key = self._queue[0]
                    try:
                        total = await self._count(client, key)
                        await client.publish(self.channel, notice(self.instance, key, total))
                    except (RedisError, OSError) as exc:
                        _unless_cancelled(exc)
                        self._failed("publisher", exc)
                        await asyncio.sleep(RETRY_S)
                        continue
                    self._queue.popleft()
                    self._up("publisher")
        finally:
            await _quietly(client.aclose())

    async def _count(self, client: Any, key: str) -> int:
        """Count one failure under ``key``; its total within the window."""
        now = time.time()
        names = self._slices(key, now)
        expire_s = max(1, math.ceil(self.limiter.window_s + 2 * self.slice_s))
        pipe = client.pipeline(transaction=False)
        pipe.incr(names[0])
        pipe.expire(names[0], expire_s)
        pipe.mget(names)
        pipe.zadd(self.recent, {key: now})
        pipe.zremrangebyscore(self.recent, 0, now - self.limiter.window_s)
        pipe.zremrangebyrank(self.recent, 0, -RECENT_MAX - 1)
        pipe.expire(self.recent, expire_s)
        counts = (await pipe.execute())[2]
        return _total(counts)

    async def _catch_up(self, client: Any) -> None:
        """Absorb the window's totals of the recently failed keys (after subscribing:
        a notice sent meanwhile arrives on the channel, one sent before is read here)."""
        now = time.time()
        keys = await client.zrevrangebyscore(
            self.recent, "+inf", now - self.limiter.window_s, start=0, num=RECENT_MAX
        )
        names = [k.decode() if isinstance(k, bytes) else str(k) for k in keys]
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            pipe = client.pipeline(transaction=False)
            for key in chunk:
                pipe.mget(self._slices(key, now))
            for key, counts in zip(chunk, await pipe.execute(), strict=True):
                if len(key) <= KEY_MAX and key.startswith(KEY_KINDS):
                    self._absorb(key, _total(counts))

    def _slices(self, key: str, now: float) -> list[str]:
        """Redis names of ``key``'s counters for the window ending at ``now``, newest first."""
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        now_slice = math.floor(now / self.slice_s)
        return [f"{self.prefix}:{digest}:{now_slice - back}" for back in range(SLICES + 1)]

    # -- health ---------------------------------------------------------------------

    def _failed(self, part: str, exc: BaseException) -> None:
        if not self._down:
            log.warning(
                "login failures are not shared with other workers and instances (each "
                "counts its own) until Redis answers again: %s",
                type(exc).__name__,
                extra={"event": "sasl_sharing_down", "reason": type(exc).__name__},
            )
        self._down.add(part)

    def _up(self, part: str) -> None:
        if part in self._down:
            self._down.discard(part)
            if not self._down:
                log.info("login failures are shared again", extra={"event": "sasl_sharing_up"})


def _unless_cancelled(exc: BaseException | None = None) -> None:
    """Raise a cancellation when this task was asked to stop: redis-py can swallow a
    cancellation that lands inside one of its calls (or turn it into a timeout or
    connection error), and waiting or retrying then would keep a stopping gateway (or
    worker) waiting forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


def _total(counts: list[Any]) -> int:
    return sum(int(count) for count in counts if count is not None)


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(Exception):  # closing a broken connection may fail
        await awaitable
