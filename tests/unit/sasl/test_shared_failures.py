"""Login failures shared between limiters: ``FailureLimiter.absorb`` and the notices
(pure), then two limiters sharing through a real Redis, and one that loses it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from gateway.sasl import FailureLimiter, address_key, principal_key
from gateway.sasl.shared_failures import SharedFailures, notice, read_notice
from tests.redis_server import RedisServer

ADDRESS = address_key("192.0.2.7")
VICTIM = principal_key("ak_victim")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_absorbed_failures_delay_and_lock_as_local_ones() -> None:
    clock = Clock()
    limiter = FailureLimiter(max_failures=3, lockout_address_failures=5, clock=clock)
    limiter.record_failure(ADDRESS)
    assert limiter.absorb(ADDRESS, 3) is False  # 2 more: 3 in the window
    assert limiter.failures(ADDRESS) == 3 and limiter.delay(ADDRESS) == 1.0
    assert limiter.absorb(ADDRESS, 2) is False  # never lowers the count
    assert limiter.failures(ADDRESS) == 3
    assert limiter.absorb(ADDRESS, 5) is True and limiter.locked_out(ADDRESS)
    assert limiter.absorb(ADDRESS, 9) is False  # already locked: not reported twice
    clock.now += limiter.window_s + 1  # absorbed failures age out like local ones
    assert limiter.failures(ADDRESS) == 0


def test_the_observer_hears_every_counted_failure_but_not_absorbed_ones() -> None:
    limiter = FailureLimiter(clock=Clock())
    heard: list[tuple[str, ...]] = []
    limiter.observer = heard.append
    limiter.record_failure(ADDRESS, VICTIM)
    limiter.failed(ADDRESS, refused=True)  # a lockout refusal is not a failure
    limiter.absorb(VICTIM, 4)
    assert heard == [(ADDRESS, VICTIM)]


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"origin": "o", "key": "addr:1.2.3.4"}',
        b'{"origin": "o", "key": "session:x", "total": 3}',
        b'{"origin": "o", "key": "addr:1.2.3.4", "total": -1}',
        b'{"origin": "o", "key": "addr:1.2.3.4", "total": true}',
        b'{"origin": "o", "key": "addr:1.2.3.4", "total": "3"}',
        ('{"origin": "o", "key": "principal:' + "x" * 700 + '", "total": 3}').encode(),
        None,
    ],
)
def test_a_malformed_notice_is_refused(data: object) -> None:
    assert read_notice(data) is None


def test_a_notice_round_trips() -> None:
    assert read_notice(notice("o", VICTIM, 4).encode()) == ("o", VICTIM, 4)


# -- through a real Redis -------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="function")
async def pair(redis: RedisServer) -> AsyncIterator[list[SharedFailures]]:
    """Two workers' limiters sharing through ``redis``."""
    shared = [
        SharedFailures(FailureLimiter(max_failures=3, lockout_address_failures=4), redis.url)
        for _ in range(2)
    ]
    tasks = [asyncio.create_task(s.run()) for s in shared]
    try:
        await asyncio.wait_for(asyncio.gather(*(s.subscribed.wait() for s in shared)), 10)
        yield shared
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _until(check: Callable[[], bool], within_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not shared in time"
        await asyncio.sleep(0.01)


async def test_failures_on_two_workers_count_together(pair: list[SharedFailures]) -> None:
    first, second = (s.limiter for s in pair)
    first.record_failure(ADDRESS, VICTIM)
    second.record_failure(ADDRESS)
    # Each key's total is its own notice, in no set order across the two publishers:
    # wait for all three to arrive (the address's two may land before the victim's one).
    await _until(
        lambda: (
            first.failures(ADDRESS) == second.failures(ADDRESS) == 2
            and second.failures(VICTIM) == 1
        )
    )
    assert first.failures(VICTIM) == 1
    assert first.delay(ADDRESS) == second.delay(ADDRESS) == 0.0  # below max_failures
    first.record_failure(ADDRESS)
    await _until(lambda: second.delay(ADDRESS) > 0)
    second.record_failure(ADDRESS)  # the fourth, anywhere: locked out on both
    await _until(lambda: first.locked_out(ADDRESS) and second.locked_out(ADDRESS))
    assert not first.locked_out(address_key("192.0.2.8"))


async def test_a_lost_redis_leaves_each_worker_counting_its_own(
    redis: RedisServer, pair: list[SharedFailures], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = (s.limiter for s in pair)
    caplog.set_level(logging.INFO, logger="kgw.sasl")
    redis.kill()
    for _ in range(4):
        first.record_failure(ADDRESS)
    assert first.locked_out(ADDRESS)  # its own count still holds
    await _until(lambda: "sasl_sharing_down" in _events(caplog))
    assert second.failures(ADDRESS) == 0
    assert redis.url not in caplog.text
    redis.start()
    await _until(lambda: pair[1].subscribed.is_set(), within_s=15)
    await _until(lambda: "sasl_sharing_up" in _events(caplog), within_s=15)
    # the failures queued while Redis was down are counted when it is back
    await _until(lambda: second.failures(ADDRESS) >= 1, within_s=15)


async def test_a_worker_that_subscribes_late_catches_up(redis: RedisServer) -> None:
    """Pub/sub keeps nothing for an absent subscriber: the totals counted before a
    worker (re)subscribes reach it through the recent-key set."""
    early = SharedFailures(FailureLimiter(max_failures=3, lockout_address_failures=4), redis.url)
    late = SharedFailures(FailureLimiter(max_failures=3, lockout_address_failures=4), redis.url)
    tasks = [asyncio.create_task(early.run())]
    try:
        await asyncio.wait_for(early.subscribed.wait(), 10)
        for _ in range(4):
            early.limiter.record_failure(ADDRESS, VICTIM)
        await _until(lambda: not early._queue)  # all four counted in Redis
        assert late.limiter.failures(ADDRESS) == 0
        tasks.append(asyncio.create_task(late.run()))
        await asyncio.wait_for(late.subscribed.wait(), 10)
        assert late.limiter.failures(ADDRESS) == 4 and late.limiter.locked_out(ADDRESS)
        assert late.limiter.failures(VICTIM) == 4
        assert late.limiter.failures(address_key("192.0.2.8")) == 0
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _events(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "event", "")) for r in caplog.records]
