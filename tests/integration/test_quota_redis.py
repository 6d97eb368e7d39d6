"""Quota engines sharing one real Redis (Debian's redis-server, started here on a free
loopback port; a missing binary fails these tests).

Three ``QuotaEngine`` instances stand for three gateway instances; simulated
clients charge them at twice the quota and honour every throttle, as Kafka clients
do with throttle_time_ms (KIP-219). Every byte charged counts as admitted: a
throttled request is still forwarded, only the next one waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.alter_client_quotas.v1.request import EntityData as AlterEntityData
from kio.schema.alter_client_quotas.v1.request import EntryData as AlterEntry
from kio.schema.alter_client_quotas.v1.request import OpData as AlterOp
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from gateway.cli import main
from gateway.quotas import (
    QuotaConfig,
    QuotaEngine,
    QuotaKind,
    QuotaOp,
    RedisQuotaStore,
    Subject,
    Target,
)
from gateway.quotas.bucket import GlobalBucket
from gateway.quotas.redis_sync import SharedBuckets, Take

from ..conftest import GatewayFactory
from ..redis_server import RedisServer, free_port
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration

RATE = 200_000.0  # bytes/s for the tenant, shared by every instance
BURST = 50_000.0
SIZE = 1000  # bytes per produce request
P = QuotaKind.PRODUCE_BYTES
ALICE = Subject("User:alice", None, "acme", "10.0.0.1")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def config(redis: RedisServer, **overrides: Any) -> QuotaConfig:
    settings: dict[str, Any] = {
        "redis_url": redis.url,
        "key_prefix": f"kgw:test:{uuid.uuid4().hex[:8]}:",
        "sync_interval_s": 0.02,
        "settings_refresh_s": 0.2,
        "redis_timeout_s": 0.3,
        "reconnect_max_s": 0.5,
        "max_throttle_ms": 1000,
        "expected_instances": 3,
        "default_plan": "standard",
        "plans": {"standard": {"produce_bytes": RATE, "produce_bytes_burst": BURST}},
    }
    return QuotaConfig.model_validate(settings | overrides)


@contextlib.asynccontextmanager
async def running(cfg: QuotaConfig, count: int = 3) -> AsyncIterator[list[QuotaEngine]]:
    engines = [QuotaEngine.from_config(cfg) for _ in range(count)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(engine.run(stop)) for engine in engines]
    try:
        await until(lambda: all(e.redis_up for e in engines), "every engine reached Redis")
        yield engines
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        for engine in engines:
            engine.store.close()


async def until(condition: Any, what: str, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


@dataclass
class Traffic:
    """What the clients did: (time, bytes, throttle ms) per charge."""

    charges: list[tuple[float, int, float]] = field(default_factory=list)

    def admitted(self, start: float, end: float) -> int:
        return sum(size for t, size, _ in self.charges if start <= t < end)

    def throttles(self, start: float, end: float) -> list[float]:
        return [ms for t, _, ms in self.charges if start <= t < end and ms > 0]


async def producers(
    engines: list[QuotaEngine],
    seconds: float,
    traffic: Traffic,
    factor: float = 2.0,
    size: int = SIZE,
) -> None:
    """Two clients per engine, offering ``factor`` x RATE in all, honouring throttles."""
    clients = [engine for engine in engines for _ in range(2)]
    interval = size / (RATE * factor / len(clients))
    end = time.monotonic() + seconds

    async def client(engine: QuotaEngine, offset: float) -> None:
        await asyncio.sleep(offset)
        while (now := time.monotonic()) < end:
            ms = engine.charge(ALICE, P, size)
            traffic.charges.append((now, size, ms))
            await asyncio.sleep(max(interval, ms / 1000))

    await asyncio.gather(*(client(e, i * interval / len(clients)) for i, e in enumerate(clients)))


async def test_three_instances_enforce_one_budget(redis_server: RedisServer) -> None:
    async with running(config(redis_server)) as engines:
        traffic = Traffic()
        start = time.monotonic()
        await producers(engines, 5.0, traffic, size=250)  # 1600 charges/s offered
        elapsed = time.monotonic() - start
    admitted = traffic.admitted(start, start + elapsed)
    expected = BURST + RATE * elapsed
    offered = 2 * RATE * elapsed
    print(f"admitted/expected {admitted / expected:.3f}, offered/expected {offered / expected:.2f}")
    assert abs(admitted - expected) <= 0.10 * expected, admitted / expected
    assert len(traffic.charges) > 3000
    assert len(traffic.throttles(start, start + elapsed)) > 100
    for engine in engines:  # every instance throttled: one budget, not three
        assert engine.metrics()["throttled_total.produce_bytes"] > 10
        assert engine.metrics()["syncs_total"] > 10


async def test_a_quota_set_in_redis_reaches_every_instance(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(redis_server)
    async with running(cfg) as engines:
        assert {e.limit(ALICE, P).rate for e in engines} == {RATE}  # type: ignore[union-attr]
        # kafka-configs.sh --alter --entity-type users --entity-name alice, through instance 0
        entity = (("user", "alice"),)
        ops = [QuotaOp("producer_byte_rate", RATE / 4), QuotaOp("produce_bytes_burst", 1000)]
        results = await engines[0].alter_client_quotas([(entity, ops)], "User:admin")
        assert results == [(entity, 0, None)]
        await until(
            lambda: all(e.limit(ALICE, P).rate == RATE / 4 for e in engines),  # type: ignore[union-attr]
            "every instance saw the new quota",
            within_s=2.0,
        )
        described = engines[2].describe_client_quotas([], strict=False)
        assert [(d.entity, d.values["producer_byte_rate"]) for d in described] == [
            (entity, RATE / 4)
        ]
        traffic = Traffic()
        await producers(engines, 1.0, traffic)  # spend what is left of the old burst
        start = time.monotonic()
        await producers(engines, 2.0, traffic)
        steady = traffic.admitted(start, start + 2.0)
        assert steady == pytest.approx(RATE / 4 * 2.0, rel=0.15)
        # and the command line writes the same store
        args = ["quota", "set", "--redis-url", redis_server.url, "--key-prefix", cfg.key_prefix]
        assert main([*args, "--tenant", "acme", "--fetch-bytes", "1Mi"]) == 0
        await until(
            lambda: all(e.limit(ALICE, QuotaKind.FETCH_BYTES) is not None for e in engines),
            "every instance saw the command line's quota",
            within_s=2.0,
        )
    capsys.readouterr()


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_redis_killed_and_restarted_mid_run(
    redis_server: RedisServer, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kgw.quotas")
    async with running(config(redis_server, on_redis_failure=policy)) as engines:
        traffic = Traffic()
        run = asyncio.create_task(producers(engines, 9.0, traffic))
        await asyncio.sleep(1.5)
        redis_server.kill()
        killed = time.monotonic()
        await until(lambda: not any(e.redis_up for e in engines), "every instance noticed")
        noticed = time.monotonic()
        await asyncio.sleep(2.5)
        redis_server.start()
        restarted = time.monotonic()
        await until(lambda: all(e.redis_up for e in engines), "every instance reconnected")
        recovered = time.monotonic()
        await run
    events = [getattr(r, "event", "") for r in caplog.records]
    assert events.count("quota_redis_down") == 3  # one line per instance and state change
    assert events.count("quota_redis_up") == 6  # first connection, then the recovery
    assert noticed - killed < 1.0 and recovered - restarted < 2.0
    outage = (noticed + 0.1, restarted)
    during = traffic.admitted(*outage)
    budget = RATE * (outage[1] - outage[0])
    if policy == "open":  # each instance alone at RATE / expected_instances
        assert 0.7 * budget <= during <= 1.2 * (budget + BURST), during / budget
    else:  # every limited charge waits the full max_throttle_ms
        assert set(traffic.throttles(*outage)) == {1000.0}
        assert during <= 0.2 * budget
    steady = (recovered + 1.5, killed + 7.5)  # shared again, the cap's waits over
    after = traffic.admitted(*steady)
    assert after == pytest.approx(RATE * (steady[1] - steady[0]), rel=0.15)
    for engine in engines:
        assert engine.metrics()["redis_errors_total"] >= 1


async def test_connection_limits_from_the_shared_store(redis_server: RedisServer) -> None:
    cfg = config(redis_server)
    store = RedisQuotaStore(redis_server.url, cfg.key_prefix)
    store.set_values(Target.parse("tenant:acme"), {"max_connections": 2}, "ops")
    async with running(cfg, count=2) as (first, second):
        await until(lambda: second.settings.quotas != {}, "the settings were read")
        assert first.connection_opened("10.0.0.1", "acme") is None
        assert first.connection_opened("10.0.0.2", "acme") is None
        assert first.connection_opened("10.0.0.3", "acme") == "tenant_max_connections"
        assert second.connection_opened("10.0.0.3", "acme") is None  # counted per instance
        first.connection_closed("10.0.0.1", "acme")
        assert first.connection_opened("10.0.0.3", "acme") is None
        # kafka-configs.sh --entity-type ips --entity-name 10.0.0.9 connection_creation_rate=1
        entity = (("ip", "10.0.0.9"),)
        await first.alter_client_quotas([(entity, [QuotaOp("connection_creation_rate", 1)])], "a")
        await until(
            lambda: second.settings.quotas.get(Target.parse("ip:10.0.0.9")) is not None,
            "the other instance saw the ip quota",
        )
        assert second.connection_opened("10.0.0.9") is None
        assert second.connection_opened("10.0.0.9") == "address_connection_rate"
    store.close()


async def test_the_script_does_what_its_python_model_does(redis_server: RedisServer) -> None:
    shared = SharedBuckets(redis_server.url, "kgw:model:", 1.0)
    await shared.connect()
    model = GlobalBucket(now=0.0)
    rate, burst, floor = 1e-9, 500.0, -1000.0  # no refill worth speaking of
    steps = [(0, 100), (0, 100), (350, 100), (-50, 0), (900, 10), (0, 10), (-5000, 0), (0, 800)]
    admin = RedisQuotaStore(redis_server.url, "kgw:model:")
    try:
        for number, (debit, want) in enumerate(steps):
            if number == 4:  # scripts flushed behind the engine's back: EVALSHA reloads it
                admin._client.script_flush()
            take = Take("b1", rate, burst, floor, debit, want)
            (replies, _) = await shared.sync([take], with_version=False)
            expected = model.take(rate, burst, floor, debit, want, now=0.0)
            assert replies[0] == pytest.approx(expected, abs=1e-3), (debit, want)
        ttl = admin._client.pttl("kgw:model:b:b1")
        assert 60_000 < ttl <= 30 * 86_400_000 + 60_000  # forgotten once it would be full
    finally:
        admin.close()
        await shared.close()


# -- a real gateway, a real producer, Redis SIGKILLed and restarted ----------------------------


def _metric(port: int, name: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match[1]) if match else None


def _wait_metric(port: int, name: str, value: float, within_s: float = 20.0) -> float:
    """Seconds until ``name`` reads ``value`` (fails after ``within_s``)."""
    started = time.monotonic()
    while (seen := _metric(port, name)) != value:
        if time.monotonic() - started > within_s:
            raise AssertionError(f"{name} stayed {seen}, expected {value}")
        time.sleep(0.1)
    return time.monotonic() - started


async def _alter_through(gateway: str) -> tuple[float, Any, Any]:
    """AlterClientQuotas then Metadata on one connection: (seconds, both responses)."""
    conn = await RawConnection.open(gateway)
    try:
        started = time.monotonic()
        entry = AlterEntry(
            entity=(AlterEntityData(entity_type="user", entity_name="during-outage"),),
            ops=(AlterOp(key="producer_byte_rate", value=1000.0, remove=False),),
        )
        altered = await conn.request(
            AlterClientQuotasRequest(entries=(entry,), validate_only=False),
            AlterClientQuotasResponse,
        )
        metadata = await conn.request(
            MetadataRequest(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            MetadataResponse,
        )  # fmt: skip
        return time.monotonic() - started, altered, metadata
    finally:
        conn.close()


def test_redis_sigkilled_under_a_real_producer(
    redis_server: RedisServer, gateway_factory: GatewayFactory, topic: str
) -> None:
    metrics_port = free_port()
    prefix = f"kgw:e2e:{uuid.uuid4().hex[:8]}:"
    gateway = gateway_factory(
        metrics={"port": metrics_port},
        quotas={
            "redis_url": redis_server.url, "key_prefix": prefix, "on_redis_failure": "open",
            "redis_timeout_s": 0.5, "reconnect_max_s": 1.0, "max_throttle_ms": 1000,
            "default_plan": "metered",
            "plans": {"metered": {"produce_bytes": 2_000_000, "produce_bytes_burst": 1_000_000}},
        },
    )  # fmt: skip
    _wait_metric(metrics_port, "kgw_quota_redis_up", 1.0)
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    acked: list[tuple[float, int]] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({
            "bootstrap.servers": gateway.bootstrap, "acks": "all", "linger.ms": 5,
            "enable.idempotence": True, "message.timeout.ms": 60000,
        })  # fmt: skip

        def delivered(err: Any, message: Any) -> None:
            if err is None:
                acked.append((time.monotonic(), int(message.value()[:8])))
            else:
                failed.append(str(err))

        number = 0
        while not stop.is_set():
            producer.produce(topic, value=b"%08d" % number + b"x" * 992, on_delivery=delivered)
            number += 1
            producer.poll(0.002)
        assert producer.flush(60) == 0

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    time.sleep(3.0)
    redis_server.kill()  # SIGKILL: no goodbye
    killed = time.monotonic()
    noticed_s = _wait_metric(metrics_port, "kgw_quota_degraded", 1.0)
    assert _metric(metrics_port, "kgw_quota_redis_up") == 0.0
    # A quota change while the store is gone: a clear error for the entry, quickly, and the
    # connection goes on serving.
    took, altered, metadata = asyncio.run(_alter_through(gateway.bootstrap))
    ((entry),) = altered.entries
    assert int(entry.error_code) == -1 and "unavailable" in (entry.error_message or ""), entry
    assert took < 10.0 and len(metadata.brokers) == 3
    time.sleep(3.0)
    assert (_metric(metrics_port, "kgw_quota_buckets_local") or 0) > 0  # failing open: local
    redis_server.start()  # same port, same append-only file
    restarted = time.monotonic()
    recovered_s = _wait_metric(metrics_port, "kgw_quota_redis_up", 1.0)
    assert _metric(metrics_port, "kgw_quota_degraded") == 0.0
    time.sleep(2.0)
    stop.set()
    thread.join(90)
    assert not thread.is_alive() and not failed, failed[:3]
    assert gateway.proc is not None and gateway.proc.poll() is None  # no crash

    # Records kept flowing during the outage (fail open: nothing stalled) and after it.
    during = [n for t, n in acked if killed + noticed_s < t < restarted]
    after = [n for t, n in acked if t > restarted + recovered_s]
    print(
        f"acked {len(acked)} records; {len(during)} while Redis was down, {len(after)} after; "
        f"outage noticed in {noticed_s:.2f}s, reconnected {recovered_s:.2f}s after the restart"
    )
    assert len(during) > 100 and len(after) > 100
    # No acknowledged record was lost: every one is in the topic.
    consumer = Consumer({
        "bootstrap.servers": gateway.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    wanted = {n for _, n in acked}
    seen: set[int] = set()
    deadline = time.monotonic() + 90
    while not wanted <= seen and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                seen.add(int(message.value()[:8]))
    consumer.close()
    assert wanted <= seen, f"{len(wanted - seen)} acknowledged records missing"
    events = [e["event"] for e in (json.loads(line) for line in gateway.log_records())
              if e.get("logger") == "kgw.quotas"]  # fmt: skip
    assert events.count("quota_redis_down") == 1 and events.count("quota_redis_up") == 2
    assert "quota_change_failed" in events
