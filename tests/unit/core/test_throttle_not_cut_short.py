"""A throttle is never cut short: a later response's shorter throttle must not end a
longer mute early (a tenant could pipeline a big Produce behind a Fetch answered with
a 1 ms throttle and have its 10 s mute replaced). The core asks for an extend-only
timer; the runtime keeps the later deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames
from gateway.runtime.client import ClientConnection

from ..conftest import MakeAuthorizer
from .harness import build


def _connection() -> ClientConnection:
    conn = object.__new__(ClientConnection)  # only the timer bookkeeping is used
    conn._timers = {}
    conn.closed = False
    return conn


def test_an_extend_only_timer_keeps_the_later_deadline() -> None:
    async def run() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        conn = _connection()
        conn._start_timer("throttle", 10.0, extend=True)
        long_deadline = conn._timers["throttle"].when()
        conn._start_timer("throttle", 0.001, extend=True)  # shorter: ignored
        kept = conn._timers["throttle"].when()
        conn._start_timer("throttle", 20.0, extend=True)  # longer: taken
        later = conn._timers["throttle"].when()
        for handle in conn._timers.values():
            handle.cancel()
        assert long_deadline > loop.time() + 9
        return long_deadline, kept, later

    long_deadline, kept, later = asyncio.run(run())
    assert kept == long_deadline and later > long_deadline


def test_a_plain_timer_is_still_replaced() -> None:
    async def run() -> tuple[float, float]:
        conn = _connection()
        conn._start_timer("auth", 10.0)
        first = conn._timers["auth"].when()
        conn._start_timer("auth", 0.001)
        second = conn._timers["auth"].when()
        conn._timers["auth"].cancel()
        return first, second

    first, second = asyncio.run(run())
    assert second < first


@pytest.mark.asyncio
async def test_the_core_asks_for_extend_only_throttle_timers(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    quotas = {"store": {"tenant:acme": {"requests": 1, "requests_burst": 1}}}
    h = await build({"tenant": "acme", "quotas": quotas}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    body = {"acks": 0, "topic_data": [{"name": "a.t", "partition_data": [{"index": 0}]}]}
    timers: list[cmd.StartTimer] = []
    for correlation_id in (1, 2):
        frame = h.request({"api": "Produce", "version": 9, "id": correlation_id, "body": body})
        out = h.handle(RequestFrames([frame]))
        timers += [c for c in out if isinstance(c, cmd.StartTimer) and c.name == "throttle"]
    assert timers and all(t.extend for t in timers)
    assert cmd.StartTimer("auth", 1.0).extend is False  # other timers are replaced
