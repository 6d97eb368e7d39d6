"""Policy-change notices between gateway instances, over Redis pub/sub.

The instance (or ``kgw policy`` run) that changes the policy publishes
``{"origin": <instance>, "digest": <sha256 of the policy files>}`` on the
configured channel; every other instance re-reads its files at once instead of
waiting for its next poll. The files stay the source of truth: the notice carries
no rules, so a lost notice only delays convergence until the next poll. The
connection URL may hold a password, so it never reaches a log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("kgw.authz")
OnNotice = Callable[[str | None], None]
RETRY_S = 1.0


class Notifier(Protocol):
    async def run(self, on_notice: OnNotice) -> None:
        """Deliver other instances' notices to ``on_notice`` until cancelled.

        ``on_notice(None)`` after every (re)connection: notices may have been missed.
        """

    async def publish(self, digest: str) -> bool:
        """Tell the other instances; False when that was not possible right now."""


def _message(origin: str, digest: str) -> str:
    return json.dumps({"origin": origin, "digest": digest})


class RedisNotifier:
    def __init__(self, url: str, channel: str) -> None:
        self.url = url
        self.channel = channel
        self.instance = uuid.uuid4().hex
        self._client: Any = None
        self.subscribed = asyncio.Event()

    async def run(self, on_notice: OnNotice) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError

        down = False
        while True:
            client = aioredis.Redis.from_url(self.url)
            pubsub: Any = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                self._client = client
                self.subscribed.set()
                if down:
                    log.info("policy notices available again", extra={"event": "policy_notify_up"})
                down = False
                on_notice(None)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        self._deliver(message.get("data"), on_notice)
            except (RedisError, OSError, ValueError) as exc:
                if not down:
                    log.warning(
                        "policy notices unavailable; polling the files only: %s",
                        type(exc).__name__,
                        extra={"event": "policy_notify_down", "reason": type(exc).__name__},
                    )
                down = True
            finally:
                self._client = None
                self.subscribed.clear()
                await _quietly(pubsub.aclose())
                await _quietly(client.aclose())
            await asyncio.sleep(RETRY_S)

    def _deliver(self, data: object, on_notice: OnNotice) -> None:
        try:
            notice = json.loads(data if isinstance(data, (str, bytes)) else b"")
            origin, digest = notice["origin"], notice["digest"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed policy notice", extra={"event": "policy_notice_bad"})
            return
        if origin != self.instance and isinstance(digest, str):
            on_notice(digest)

    async def publish(self, digest: str) -> bool:
        from redis.exceptions import RedisError

        client = self._client
        if client is None:
            return False
        try:
            await client.publish(self.channel, _message(self.instance, digest))
        except (RedisError, OSError):
            return False
        return True


def publish_once(url: str, channel: str, digest: str, timeout_s: float = 2.0) -> int:
    """Publish one notice from a short-lived process (``kgw policy``); receivers reached."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    try:
        return int(client.publish(channel, _message("kgw-cli-" + uuid.uuid4().hex, digest)))
    finally:
        client.close()


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:  # closing a broken connection may fail; nothing to do about it
        return
