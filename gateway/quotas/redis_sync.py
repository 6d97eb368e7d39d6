"""The engine's side of Redis: one pipelined round trip per sync, atomic server-side script.

Each shared bucket is a hash ``<prefix>b:<bucket>`` with ``tokens`` and ``ts``
(Redis server time, so instances' clocks never matter). ``TAKE_LUA`` refills it,
books a debit (the debt an instance ran up beyond its lease; negative: a lease
handed back), then grants up to ``want`` tokens as a new lease — all in one atomic
script, run with EVALSHA (loaded again after a Redis restart). ``bucket.GlobalBucket``
is the same arithmetic in Python.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .model import QuotaSettings
from .store import SECTIONS, decode_settings

TAKE_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local floor = tonumber(ARGV[3])
local debit = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
  ts = now
end
tokens = math.min(burst, math.max(floor, tokens - debit))
local grant = 0
if want > 0 and tokens > 0 then
  grant = math.min(want, tokens)
end
tokens = tokens - grant
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(ts))
redis.call('PEXPIRE', KEYS[1], ttl)
return {tostring(grant), tostring(tokens)}
"""


MAX_TTL_MS = 30 * 86_400_000  # an absurdly slow refill must not break PEXPIRE


@dataclass(frozen=True, slots=True)
class Take:
    """One bucket's part of a sync."""

    bucket: str
    rate: float
    burst: float
    floor: float
    debit: float
    want: float

    def args(self) -> list[str]:
        # Once idle this long the bucket would be full again: Redis may forget it.
        ttl_ms = math.ceil(min((self.burst - self.floor) / self.rate * 1000, MAX_TTL_MS)) + 60_000
        numbers = (self.rate, self.burst, self.floor, self.debit, self.want)
        return [*(repr(float(n)) for n in numbers), str(ttl_ms)]


class SharedBuckets:
    """An asyncio Redis client for leases and settings; every error is the caller's to handle."""

    def __init__(self, url: str, prefix: str, timeout_s: float) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout_s = timeout_s
        self._client: Any = None
        self._sha: str | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def connect(self) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        client = aioredis.Redis.from_url(
            self.url,
            socket_timeout=self.timeout_s,
            socket_connect_timeout=self.timeout_s,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )
        try:
            self._sha = str(await client.script_load(TAKE_LUA))
        except BaseException:
            await _quietly(client.aclose())
            raise
        self._client = client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await _quietly(client.aclose())

    async def sync(
        self, takes: Sequence[Take], with_version: bool
    ) -> tuple[list[tuple[float, float]], str | None]:
        """Run every take in one round trip; ``(grant, tokens)`` each, and the settings
        version when asked for."""
        from redis.exceptions import NoScriptError

        client = self._client
        if client is None:
            raise ConnectionError("not connected")
        results: list[Any] = [None] * len(takes)
        pending = list(range(len(takes)))
        version: str | None = None
        for attempt in range(2):
            pipe = client.pipeline(transaction=False)
            for index in pending:
                take = takes[index]
                pipe.evalsha(self._sha, 1, f"{self.prefix}b:{take.bucket}", *take.args())
            if with_version and attempt == 0:
                pipe.get(f"{self.prefix}version")
            replies = await pipe.execute(raise_on_error=False)
            if with_version and attempt == 0:
                version = str(replies.pop() or "0")
            missing = []
            for index, reply in zip(pending, replies, strict=True):
                if isinstance(reply, NoScriptError):  # Redis restarted: load the script again
                    missing.append(index)
                elif isinstance(reply, Exception):
                    raise reply
                else:
                    results[index] = reply
            if not missing:
                break
            self._sha = str(await client.script_load(TAKE_LUA))
            pending = missing
        else:
            raise ConnectionError("the quota script could not be loaded")
        return [(float(grant), float(tokens)) for grant, tokens in results], version

    async def load_settings(self) -> QuotaSettings:
        client = self._client
        if client is None:
            raise ConnectionError("not connected")
        pipe = client.pipeline(transaction=True)
        for section in SECTIONS:
            pipe.hgetall(f"{self.prefix}{section}")
        pipe.get(f"{self.prefix}version")
        *hashes, version = await pipe.execute()
        raw = {
            s: {k: _text(v) for k, v in h.items()} for s, h in zip(SECTIONS, hashes, strict=True)
        }
        return decode_settings(raw, str(version or "0"), source="redis")


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:  # closing a broken connection may fail; nothing to do about it
        return
