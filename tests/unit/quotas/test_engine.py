"""The engine on one instance (no Redis) with an injected clock, the Redis failure
policies, connection limits, and settings that change under a running engine."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.quotas import QuotaConfig, QuotaEngine, QuotaKind, Subject, Target
from gateway.quotas.store import FileQuotaStore

from .conftest import ALICE, Clock, EngineFactory

P = QuotaKind.PRODUCE_BYTES
NOBODY = Subject("User:nobody", None, None, "10.9.9.9")


def test_burst_then_throttle_then_steady(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 1000, "produce_bytes_burst": 3000}})
    assert [engine.charge(ALICE, P, 1000, now=0.0) for _ in range(3)] == [0, 0, 0]
    assert engine.charge(ALICE, P, 500, now=0.0) == pytest.approx(500.0)
    # the client waited its 500 ms: the next 1000 leaves it 1000 short again
    assert engine.charge(ALICE, P, 1000, now=0.5) == pytest.approx(1000.0)
    assert engine.metrics()["throttled_total.produce_bytes"] == 2


def test_the_throttle_is_capped(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 10}}, max_throttle_ms=2000)
    assert engine.charge(ALICE, P, 10**6, now=0.0) == 2000


def test_the_most_specific_quota_applies(make_engine: EngineFactory) -> None:
    engine = make_engine(
        {"api-key:key-1": {"produce_bytes": 100}, "tenant:acme": {"produce_bytes": 10**9}}
    )
    assert engine.charge(ALICE, P, 300, now=0.0) == pytest.approx(2000.0)  # 200 short at 100/s
    colleague = Subject("User:alice", "key-2", "acme", "10.0.0.1")
    assert engine.charge(colleague, P, 300, now=0.0) == 0


def test_subjects_without_a_quota_are_never_throttled(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 1}})
    assert engine.charge(NOBODY, P, 10**9, now=0.0) == 0
    assert engine.limit(NOBODY, P) is None


def test_throttle_for_books_nothing(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"fetch_bytes": 100, "fetch_bytes_burst": 100}})
    f = QuotaKind.FETCH_BYTES
    assert engine.throttle_for(ALICE, f, now=0.0) == 0
    engine.charge(ALICE, f, 150, now=0.0)
    assert engine.throttle_for(ALICE, f, now=0.0) == pytest.approx(500.0)
    assert engine.throttle_for(ALICE, f, now=0.0) == pytest.approx(500.0)
    assert engine.throttle_for(ALICE, f, now=0.5) == 0


def test_a_broken_subject_never_raises_into_the_caller(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 1}})
    broken: Any = Subject(["unhashable"], None, None, "h")  # type: ignore[arg-type]
    assert engine.charge(broken, P, 1) == 0
    assert engine.metrics()["internal_errors_total"] == 1


def _shared_engine(clock: Clock, **config: Any) -> QuotaEngine:
    cfg = QuotaConfig.model_validate({"redis_url": "redis://127.0.0.1:1/0", **config})
    engine = QuotaEngine.from_config(cfg, store=FileQuotaStore("/nonexistent/q.json"), clock=clock)
    engine.apply_settings(
        engine.settings.__class__({Target.parse("tenant:acme"): {"produce_bytes": 300}})
    )
    return engine


def test_failing_open_splits_the_rate_between_the_expected_instances(clock: Clock) -> None:
    engine = _shared_engine(clock, on_redis_failure="open", expected_instances=3)
    engine.set_redis_state("down", "ConnectionError")
    # local bucket: 100/s, burst 100 (a third of the shared 300/300)
    assert engine.charge(ALICE, P, 100, now=0.0) == 0
    assert engine.charge(ALICE, P, 100, now=0.0) == pytest.approx(1000.0)
    assert engine.metrics()["degraded"] == 1 and not engine.redis_up


def test_failing_closed_throttles_every_limited_charge_to_the_cap(clock: Clock) -> None:
    engine = _shared_engine(clock, on_redis_failure="closed", max_throttle_ms=1500)
    engine.set_redis_state("down", "ConnectionError")
    assert engine.charge(ALICE, P, 1, now=0.0) == 1500
    assert engine.throttle_for(ALICE, P, now=0.0) == 1500
    assert engine.charge(NOBODY, P, 1, now=0.0) == 0  # no quota, nothing to protect
    engine.set_redis_state("up")
    assert engine.charge(ALICE, P, 1, now=0.0) == 0


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_an_unreachable_redis_is_one_log_line_and_never_a_stall(
    policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = QuotaConfig(
        redis_url=f"redis://127.0.0.1:{_dead_port()}/0",
        on_redis_failure=policy,  # type: ignore[arg-type]
        reconnect_max_s=0.1,
        max_throttle_ms=777,
        default_plan="p",
        plans={"p": {"produce_bytes": 1000}},  # type: ignore[dict-item]
    )
    engine = QuotaEngine.from_config(cfg, store=FileQuotaStore("/nonexistent/q.json"))
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, "kgw.quotas")
    task = asyncio.create_task(engine.run(stop))
    await asyncio.sleep(1.0)  # several reconnect attempts
    started = time.perf_counter()
    throttle = engine.charge(ALICE, P, 10)
    assert time.perf_counter() - started < 0.01
    stop.set()
    await asyncio.wait_for(task, 5)
    downs = [r for r in caplog.records if getattr(r, "event", "") == "quota_redis_down"]
    assert len(downs) == 1 and not engine.redis_up
    assert engine.metrics()["redis_errors_total"] >= 3  # it kept retrying
    assert throttle == (777 if policy == "closed" else 0)


def test_connection_limits_per_address(make_engine: EngineFactory) -> None:
    engine = make_engine(address_limits={"max_connections": 2, "connection_rate": 3})
    assert engine.connection_opened("10.0.0.1", now=0.0) is None
    assert engine.connection_opened("10.0.0.1", now=0.0) is None
    assert engine.connection_opened("10.0.0.1", now=0.0) == "address_max_connections"
    assert engine.connection_opened("10.0.0.2", now=0.0) is None  # another address
    engine.connection_closed("10.0.0.1")
    engine.connection_closed("10.0.0.1")
    assert engine.connection_opened("10.0.0.1", now=0.0) is None  # the 3rd this second
    assert engine.connection_opened("10.0.0.1", now=0.0) == "address_connection_rate"
    assert engine.connection_opened("10.0.0.1", now=0.34) is None  # refilled at 3/s
    assert engine.metrics()["connections_refused_total.address_max_connections"] == 1


def test_an_ip_entry_overrides_the_address_defaults(make_engine: EngineFactory) -> None:
    engine = make_engine(
        {"ip:10.0.0.1": {"max_connections": 1}}, address_limits={"max_connections": 5}
    )
    assert engine.connection_opened("10.0.0.1", now=0.0) is None
    assert engine.connection_opened("10.0.0.1", now=0.0) == "address_max_connections"
    assert engine.connection_opened("10.0.0.2", now=0.0) is None


def test_connection_limits_per_tenant(make_engine: EngineFactory) -> None:
    engine = make_engine(
        default_plan="p", plans={"p": {"max_connections": 1, "connection_rate": 100}}
    )
    assert engine.connection_opened("10.0.0.1", "acme", now=0.0) is None
    assert engine.connection_opened("10.0.0.2", now=0.0) is None
    assert engine.connection_identified("acme", now=0.0) == "tenant_max_connections"
    engine.connection_closed("10.0.0.2")  # refused: its tenant was never counted
    engine.connection_closed("10.0.0.1", "acme")
    assert engine.connection_opened("10.0.0.3", now=0.0) is None
    assert engine.connection_identified("acme", now=0.0) is None
    assert engine.metrics()["connections_open"] == 1


def test_tenant_connection_rate(make_engine: EngineFactory) -> None:
    engine = make_engine({"tenant:acme": {"connection_rate": 2}})
    results = [engine.connection_opened(f"10.0.0.{i}", "acme", now=0.0) for i in range(3)]
    assert results == [None, None, "tenant_connection_rate"]


async def test_a_running_engine_follows_the_settings_file(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "quotas.json")
    cfg = QuotaConfig(store_file=store.path, settings_refresh_s=0.05)
    engine = QuotaEngine.from_config(cfg)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        assert engine.limit(ALICE, P) is None
        store.set_values(Target.parse("tenant:acme"), {"produce_bytes": 42}, "test")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if engine.limit(ALICE, P) is not None:
                break
        assert engine.limit(ALICE, P).rate == 42  # type: ignore[union-attr]
        store.path.write_text("{broken")  # a bad edit keeps the last good settings
        await asyncio.sleep(0.2)
        assert engine.limit(ALICE, P).rate == 42  # type: ignore[union-attr]
        assert engine.metrics()["settings_errors_total"] >= 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


def test_a_broken_settings_file_stops_start_up(tmp_path: Path) -> None:
    from gateway.quotas import StoreError

    (tmp_path / "q.json").write_text("[1, 2]")
    with pytest.raises(StoreError, match="expected a JSON object"):
        QuotaEngine.from_config(QuotaConfig(store_file=tmp_path / "q.json"))
