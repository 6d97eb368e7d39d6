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
