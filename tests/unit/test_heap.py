"""The gateway's heap is frozen once started and settled again after a policy change."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from gateway.runtime import heap


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """Leave the test process's collector as it found it."""
    yield
    gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_freezes_what_is_left_and_collects_what_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kept = [_Cycle() for _ in range(100)]
    garbage = _Cycle()
    gone = weakref.ref(garbage)
    del garbage
    with caplog.at_level(logging.INFO, logger="kgw.server"):
        frozen = heap.settle("start")
    assert gone() is None  # the collection ran first
    assert frozen >= gc.get_freeze_count() > len(kept)
    assert not any(type(o) is _Cycle for o in gc.get_objects()), "kept ones are frozen"
    record = next(r for r in caplog.records if getattr(r, "event", "") == "heap_settled")
    assert record.reason == "start" and record.count == frozen  # type: ignore[attr-defined]


def test_settling_again_releases_cycles_dropped_while_frozen() -> None:
    holder = [_Cycle()]
    gone = weakref.ref(holder[0])
    heap.settle("start")
    holder.clear()  # a frozen cycle dropped: reference counting cannot free it
    gc.collect()
    assert gone() is not None  # frozen: no collection sees it
    heap.settle("policy")
    assert gone() is None


async def test_the_loop_settles_at_start_and_after_each_policy_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reasons: list[str] = []
    monkeypatch.setattr(heap, "settle", lambda reason: reasons.append(reason) or 0)
    policy = SimpleNamespace(version=1)
    stop = asyncio.Event()
    gateway = SimpleNamespace(policy=policy, stopping=False, supervisor=SimpleNamespace(stop=stop))
    task = asyncio.create_task(heap.heap_loop(gateway, check_s=0.01))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert reasons == ["start"]  # unchanged policy: nothing more
    policy.version = 2
    await asyncio.sleep(0.05)
    assert reasons == ["start", "policy"]
    gateway.stopping = True
    stop.set()
    await asyncio.wait_for(task, 1)


async def test_without_authorization_it_settles_once() -> None:
    stop = asyncio.Event()
    gateway = SimpleNamespace(policy=None, stopping=False, supervisor=SimpleNamespace(stop=stop))
    task = asyncio.create_task(heap.heap_loop(gateway, check_s=0.01))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() > 0
    gateway.stopping = True
    stop.set()
    await asyncio.wait_for(task, 1)
