"""The background task behind a ``QuotaEngine``.

Alone (no Redis): re-read the settings file when it changes, forget full buckets.
With Redis: one pipelined round trip carrying the due leases (and, every
``settings_refresh_s``, the settings version, which doubles as a heartbeat), at most one per
``sync_interval_s``. Between them the task sleeps until a lease falls due (``charge`` wakes
it), the next settings check or idle-lease scan, or the stop: an idle or unthrottled
gateway wakes about once a second, not 1/``sync_interval_s`` times (each wake-up of an idle
process costs ~0.2 ms of CPU on a small VM).
A failure marks Redis down (the engine then follows ``on_redis_failure``) and
reconnects with exponential backoff up to ``reconnect_max_s``; success marks it up
again. No error leaves this task, and the hot path never waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .engine import IDLE_SCAN_S, MIN_BACKOFF_S, wait_for_stop
from .redis_sync import SharedBuckets
from .store import StoreError

if TYPE_CHECKING:
    from .engine import QuotaEngine

log = logging.getLogger("kgw.quotas")
RELEASE_TIMEOUT_S = 1.0


async def run_alone(engine: QuotaEngine, stop: asyncio.Event) -> None:
    refresh = engine.cfg.settings_refresh_s
    while not stop.is_set():
        now = engine.now()
        if engine.settings_check_due(now):
            await _reload_file(engine)
        engine.prune(now)
        await wait_for_stop(stop, min(refresh, IDLE_SCAN_S))


async def _reload_file(engine: QuotaEngine) -> None:
    try:
        version = await asyncio.to_thread(engine.store.version)
        if version != engine.settings.version:
            engine.apply_settings(await asyncio.to_thread(engine.store.load))
    except StoreError as exc:
        engine.counters["settings_errors_total"] += 1
        log.warning(
            "quota settings not reloaded, keeping the last ones: %s",
            exc,
            extra={"event": "quota_settings_rejected", "reason": str(exc)},
        )


def _redis_errors() -> tuple[type[BaseException], ...]:
    from redis.exceptions import RedisError

    return (RedisError, OSError, TimeoutError)


async def run_shared(engine: QuotaEngine, shared: SharedBuckets, stop: asyncio.Event) -> None:
    errors = _redis_errors()
    timeout = engine.cfg.redis_timeout_s
    backoff = MIN_BACKOFF_S
    prune_at = 0.0
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            if (now := engine.now()) >= prune_at:  # fail-open and connection-rate buckets
                engine.prune(now)
                prune_at = now + IDLE_SCAN_S
            try:
                if not shared.connected:
                    await asyncio.wait_for(shared.connect(), timeout * 2)
                    engine.set_redis_state("up")
                await asyncio.wait_for(sync_once(engine, shared), timeout * 4)
                synced_at = engine.now()
                backoff = MIN_BACKOFF_S
            except errors as exc:
                await _down(engine, shared, type(exc).__name__)
                await wait_for_stop(stop, backoff)
                backoff = min(backoff * 2, engine.cfg.reconnect_max_s)
                continue
            except Exception:  # a bug must not end quota syncing for good
                log.exception("quota sync failed", extra={"event": "quota_error"})
                await _down(engine, shared, "internal_error")
                await wait_for_stop(stop, engine.cfg.reconnect_max_s)
                continue
            await _pause(engine, stopped, synced_at + engine.cfg.sync_interval_s, prune_at)
    finally:
        stopped.cancel()
        await _release(engine, shared)
        await shared.close()


async def _pause(
    engine: QuotaEngine, stopped: asyncio.Future[Any], earliest: float, prune_at: float
) -> None:
    """Until ``earliest`` at least (one round trip per ``sync_interval_s`` at most); then,
    unless a lease is due already, until one falls due, the next timed check or the stop."""
    now = engine.now()
    if not engine.has_due():
        latest = min(engine.next_check(), prune_at)
        if latest > now:
            waiter = engine.watch_due()
            try:
                await asyncio.wait(
                    (stopped, waiter), timeout=latest - now, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                engine.unwatch_due()
                waiter.cancel()
            now = engine.now()
    if earliest > now and not stopped.done():
        await asyncio.wait((stopped,), timeout=earliest - now)


async def _down(engine: QuotaEngine, shared: SharedBuckets, reason: str) -> None:
    engine.counters["redis_errors_total"] += 1
    engine.set_redis_state("down", reason)
    await shared.close()


async def sync_once(engine: QuotaEngine, shared: SharedBuckets) -> None:
    now = engine.now()
    work = engine.takes_due(now)
    check = engine.settings_check_due(now)
    if not work and not check:
        return
    replies, version = await shared.sync([take for _, take, _ in work], check)
    engine.synced(work, replies)
    if version is not None and version != engine.settings.version:
        engine.apply_settings(await shared.load_settings())


async def _release(engine: QuotaEngine, shared: SharedBuckets) -> None:
    """On stop, hand every unused lease back (and report debts); best effort."""
    if not shared.connected or not engine.redis_up:
        return
    work = engine.takes_due(float("inf"))
    if not work:
        return
    try:
        replies, _ = await asyncio.wait_for(
            shared.sync([take for _, take, _ in work], False), RELEASE_TIMEOUT_S
        )
        engine.synced(work, replies)
    except Exception:  # stopping anyway; the leases expire with the buckets
        return
