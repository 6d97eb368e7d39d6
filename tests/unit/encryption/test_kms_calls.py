"""The key manager's call pool is bounded: beyond ``max_pending`` calls waiting or
running, a new key's call is refused (``KmsUnavailable``) instead of queued, a key
already in flight still joins its call, and room comes back as calls finish."""

from __future__ import annotations

import threading

import pytest

from gateway.kms.api import KmsUnavailable
from gateway.kms.calls import KmsCalls


def test_calls_beyond_the_bound_are_refused_until_room_comes_back() -> None:
    release = threading.Event()
    calls = KmsCalls(threads=1, max_pending=2)
    try:
        first = calls.submit("a", lambda: release.wait(10) and "a")
        second = calls.submit("b", lambda: "b")  # queued behind the first
        assert calls.pending == 2
        with pytest.raises(KmsUnavailable, match="2 key manager calls are waiting"):
            calls.submit("c", lambda: "c")
        assert calls.refused == 1 and calls.submitted == 2
        assert calls.submit("a", lambda: "again") is first  # single flight, not counted
        release.set()
        assert first.result(10) == "a" and second.result(10) == "b"
        for key in ("a", "b"):
            calls.forget(key)
        done = threading.Event()
        third = calls.submit("c", lambda: done.set() or "c")
        assert third.result(10) == "c" and done.is_set()
    finally:
        release.set()
        calls.close()


def test_an_abandoned_call_keeps_its_place_until_the_pool_has_run_it() -> None:
    release = threading.Event()
    calls = KmsCalls(threads=1, max_pending=1)
    try:
        hung = calls.submit("a", lambda: release.wait(10))
        calls.forget("a")  # the cache gave up on it (timed out)
        with pytest.raises(KmsUnavailable):
            calls.submit("a", lambda: "retry")  # the hung call still holds the only place
        release.set()
        hung.result(10)
        assert calls.submit("a", lambda: "retry").result(10) == "retry"
    finally:
        release.set()
        calls.close()


def test_a_result_nobody_came_for_in_time_is_not_used() -> None:
    """A finished call whose request went away (its client disconnected) waits only
    ``result_ttl_s``: later, the key manager is asked again, so a key destroyed or
    disabled meanwhile is not used from the old answer."""
    now = [100.0]
    calls = KmsCalls(threads=1, result_ttl_s=2.0, clock=lambda: now[0])
    try:
        first = calls.submit("k", lambda: "old")
        assert first.result(10) == "old"
        _settle(calls)
        now[0] += 1.0
        assert calls.submit("k", lambda: "new") is first  # in time: the same answer
        now[0] += 1.5
        again = calls.submit("k", lambda: "new")
        assert again is not first and again.result(10) == "new"
        assert calls.submitted == 2
    finally:
        calls.close()


def test_stale_results_do_not_pile_up() -> None:
    now = [0.0]
    calls = KmsCalls(threads=1, max_pending=4, result_ttl_s=1.0, clock=lambda: now[0])
    try:
        for i in range(5):  # finished, never collected
            calls.submit(f"k{i}", lambda: "x").result(10)
            _settle(calls)
        now[0] += 5.0
        calls.submit("fresh", lambda: "y").result(10)
        assert set(calls._inflight) == {"fresh"}
    finally:
        calls.close()


def _settle(calls: KmsCalls) -> None:
    """Wait for the pool's done callbacks (they run just after a result is set)."""
    for _ in range(1000):
        if calls.pending == 0:
            return
        threading.Event().wait(0.001)
    raise AssertionError("a call never finished")
