"""The quota syncer sleeps until there is work (decision 0045), against a real Redis.

An idle engine used to wake every ``sync_interval_s`` (20 times a second by default,
~0.2 ms of CPU per wake-up of an idle process on a small VM); it now wakes for the
next settings check or idle-lease scan (about once a second) — and at once, paced by
``sync_interval_s``, when a charge makes a lease fall due.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.quotas import QuotaEngine

from ..redis_server import RedisServer
from .test_quota_redis import ALICE, BURST, P, config, redis_server, running, until

pytestmark = pytest.mark.integration
__all__ = ["redis_server"]  # the fixture, imported for these tests


class CountingClock:
    """``time.monotonic``, counting how often the engine (and its syncer) looks."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return time.monotonic()


async def test_an_idle_engine_wakes_about_once_a_second(redis_server: RedisServer) -> None:
    cfg = config(redis_server, sync_interval_s=0.01, settings_refresh_s=1.0)
    clock = CountingClock()
    engine = QuotaEngine.from_config(cfg, clock=clock)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        await until(lambda: engine.redis_up, "the engine reached Redis")
        await asyncio.sleep(0.5)  # the first settings load and scans are done
        before = clock.calls
        await asyncio.sleep(3.0)
        looks = clock.calls - before
        # every 10 ms (the old loop) would be >= 300 wake-ups of a few clock reads each
        assert looks < 60, f"{looks} clock reads in 3 s of idleness"
        assert engine.redis_up
    finally:
        stop.set()
        started = time.monotonic()
        await asyncio.wait_for(task, 5)
        engine.store.close()
    assert time.monotonic() - started < 1.0  # the stop does not wait for the next check


async def test_a_lease_falling_due_is_synced_at_once(redis_server: RedisServer) -> None:
    # the next timed check is up to 5 s away: only the charge can have woken the syncer
    cfg = config(redis_server, sync_interval_s=0.05, settings_refresh_s=5.0)
    async with running(cfg, count=1) as (engine,):
        await asyncio.sleep(1.2)  # past the first settings check and idle scan
        for _ in range(3):
            syncs = engine.metrics().get("syncs_total", 0)
            charged = time.monotonic()
            engine.charge(ALICE, P, BURST)  # the lease (a chunk at most) is spent: due
            await until(lambda s=syncs: engine.metrics().get("syncs_total", 0) > s,
                        "the due lease was synced", within_s=5.0)  # fmt: skip
            assert time.monotonic() - charged < 0.5
            await asyncio.sleep(0.2)


async def test_debts_still_reach_every_instance(redis_server: RedisServer) -> None:
    """Two engines, one spending: the other sees the shared bucket's debt after a sync."""
    cfg = config(redis_server, sync_interval_s=0.05, settings_refresh_s=5.0)
    async with running(cfg, count=2) as (spender, other):
        await asyncio.sleep(1.2)
        for _ in range(4):
            spender.charge(ALICE, P, BURST)
            await asyncio.sleep(0.1)
        other.charge(ALICE, P, 1)  # its first charge: lease 0, due at once
        await until(lambda: other.throttle_for(ALICE, P) > 0,
                    "the other instance sees the debt", within_s=5.0)  # fmt: skip
