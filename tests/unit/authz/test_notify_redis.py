"""Policy-change notices between instances over a real Redis (Debian's redis-server).

Polling is switched off (a 60 s interval), so only the notice can make the other
instance see a change within a second. A missing redis-server fails the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.authz.engine import Authorizer
from gateway.authz.notify import RedisNotifier
from gateway.authz.store import PolicyStore
from gateway.cli import main
from tests.redis_server import RedisServer

from .conftest import PolicyDir, rule, when

ALLOW_A = "p, User:a, TOPIC, LITERAL, t, WRITE, *, allow"
A_WRITES = when("User:a from 10.0.0.1 WRITE TOPIC t")
B_WRITES = when("User:b from 10.0.0.1 WRITE TOPIC t")
CHANNEL = "kgw:policy:test"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def watching(*authorizers: Authorizer) -> AsyncIterator[None]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(a.watch(stop)) for a in authorizers]
    try:
        for authorizer in authorizers:
            notifier = authorizer.notifier
            assert isinstance(notifier, RedisNotifier)
            await asyncio.wait_for(notifier.subscribed.wait(), 5)
        await _settle()
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def _settle() -> None:
    """Let the re-read every instance makes on (re)subscribing finish, so that
    afterwards only a notice can show an instance a change."""
    await asyncio.sleep(0.3)


def _instance(directory: Path, redis: RedisServer) -> Authorizer:
    return Authorizer(
        PolicyStore(directory), reload_interval_s=60, notifier=RedisNotifier(redis.url, CHANNEL)
    )


async def _within_one_second(authorizer: Authorizer) -> None:
    started = time.monotonic()
    while not authorizer.authorize(*B_WRITES).allowed:
        assert time.monotonic() - started < 1.0, "no notice within 1 s"
        await asyncio.sleep(0.01)


async def test_a_change_on_one_instance_reaches_the_other(
    policy_dir: PolicyDir, redis_server: RedisServer
) -> None:
    directory = policy_dir(ALLOW_A + "\n")
    first, second = _instance(directory, redis_server), _instance(directory, redis_server)
    async with watching(first, second):
        first.store.add([rule("p, User:b, TOPIC, LITERAL, t, WRITE, *, allow")], actor="User:admin")
        assert first.authorize(*B_WRITES).allowed  # the changing instance: at once
        await _within_one_second(second)
        assert second.version == 2


async def test_kgw_policy_notifies_running_instances(
    policy_dir: PolicyDir, redis_server: RedisServer, tmp_path: Path
) -> None:
    directory = policy_dir(ALLOW_A + "\n")
    instance = _instance(directory, redis_server)
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\n"
        "listeners: [{name: p, bootstrap_port: 19092, broker_port_base: 19100,"
        " advertised_host: localhost}]\n"
        f"authorization: {{policy_dir: '{directory}',"
        f" redis: {{url: '{redis_server.url}', channel: '{CHANNEL}'}}}}\n"
    )
    async with watching(instance):
        code = await asyncio.to_thread(
            main,
            [
                "policy",
                "add",
                "--config",
                str(config),
                "--principal",
                "User:b",
                "--operation",
                "WRITE",
                "--topic",
                "t",
            ],
        )
        assert code == 0
        await _within_one_second(instance)


async def test_an_instance_on_other_files_reports_it_is_out_of_sync(
    policy_dir: PolicyDir, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    first = _instance(policy_dir(ALLOW_A + "\n"), redis_server)
    second = _instance(policy_dir(ALLOW_A + "\n"), redis_server)
    async with watching(first, second):
        first.store.add([rule("p, User:b, TOPIC, LITERAL, t, WRITE, *, allow")], actor="x")
        started = time.monotonic()
        while not any(getattr(r, "event", "") == "policy_out_of_sync" for r in caplog.records):
            assert time.monotonic() - started < 2.0
            await asyncio.sleep(0.02)
        assert not second.authorize(*B_WRITES).allowed


async def test_notices_resume_after_redis_restarts(
    policy_dir: PolicyDir, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kgw.authz")
    directory = policy_dir(ALLOW_A + "\n")
    first, second = _instance(directory, redis_server), _instance(directory, redis_server)
    async with watching(first, second):
        redis_server.stop()
        started = time.monotonic()
        while any(a.notifier.subscribed.is_set() for a in (first, second)):  # type: ignore[union-attr]
            assert time.monotonic() - started < 5
            await asyncio.sleep(0.05)
        redis_server.start()
        for authorizer in (first, second):
            await asyncio.wait_for(authorizer.notifier.subscribed.wait(), 10)  # type: ignore[union-attr]
        await _settle()
        first.store.add([rule("p, User:b, TOPIC, LITERAL, t, WRITE, *, allow")], actor="x")
        await _within_one_second(second)
    events = [getattr(r, "event", "") for r in caplog.records]
    assert "policy_notify_down" in events and "policy_notify_up" in events
