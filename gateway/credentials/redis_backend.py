"""The credential store in Redis, shared by every gateway instance.

One hash per table, ``<prefix>:<table>``, field = key id or user name, value =
the record as JSON. Single-field commands (HGET, HSETNX, HSET, HDEL) make every
change atomic; nothing is cached here. The URL may hold a password: it never
reaches a log line or an error message.
"""

from __future__ import annotations

import json
from typing import Any

from .store import Record, StoreError

TIMEOUT_S = 2.0


class RedisBackend:
    def __init__(self, url: str, prefix: str = "kgw:credentials") -> None:
        import redis.asyncio as aioredis

        self.prefix = prefix
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
        )

    def _key(self, table: str) -> str:
        return f"{self.prefix}:{table}"

    async def get(self, table: str, key: str) -> Record | None:
        raw = await self._call("hget", self._key(table), key)
        return None if raw is None else _decode(raw)

    async def all(self, table: str) -> dict[str, Record]:
        raw = await self._call("hgetall", self._key(table))
        return {_text(k): _decode(v) for k, v in raw.items()}

    async def insert(self, table: str, key: str, record: Record) -> bool:
        return bool(await self._call("hsetnx", self._key(table), key, json.dumps(record)))

    async def put(self, table: str, key: str, record: Record) -> None:
        await self._call("hset", self._key(table), key, json.dumps(record))

    async def delete(self, table: str, key: str) -> bool:
        return bool(await self._call("hdel", self._key(table), key))

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, command: str, *args: str) -> Any:
        from redis.exceptions import RedisError

        try:
            return await getattr(self._client, command)(*args)
        except (RedisError, OSError) as exc:
            reason = type(exc).__name__
            raise StoreError(f"the Redis credential store is unavailable ({reason})") from None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _decode(raw: bytes | str) -> Record:
    try:
        record = json.loads(raw)
    except ValueError:
        raise StoreError("unreadable record in the Redis credential store") from None
    if not isinstance(record, dict):
        raise StoreError("unreadable record in the Redis credential store")
    return record
