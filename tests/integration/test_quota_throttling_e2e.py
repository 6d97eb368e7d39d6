"""Produce quotas through three gateway instances sharing one Redis, with a real producer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ..conftest import GatewayFactory
from ..redis_server import RedisServer

pytestmark = pytest.mark.integration
RATE = 1_000_000  # produce bytes/s for the principal, shared by every gateway instance
BURST = 500_000
RUN_S = 30.0


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_three_gateways_hold_one_produce_quota(
    gateway_factory: GatewayFactory, redis: RedisServer, topic: str
) -> None:
    quotas = {
        "redis_url": redis.url,
        "key_prefix": f"kgw:e2e:{topic}:",
        "default_plan": "metered",
        "plans": {"metered": {"produce_bytes": RATE, "produce_bytes_burst": BURST}},
    }
    gateways = [gateway_factory(quotas=quotas) for _ in range(3)]
    admin = AdminClient({"bootstrap.servers": gateways[0].bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)

    stats: list[dict[str, object]] = []
    producers = [
        Producer(
            {
                "bootstrap.servers": g.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 16384,
                "statistics.interval.ms": 1000,
                "stats_cb": lambda s: stats.append(json.loads(s)),
                "queue.buffering.max.kbytes": 4096,
            }
        )
        for g in gateways
    ]
    acked = [0]

    def delivered(err: object, message: object) -> None:
        if err is None:
            acked[0] += len(message.value())  # type: ignore[attr-defined]

    value = b"x" * 1000
    started = time.monotonic()
    offered = 0
    while time.monotonic() - started < RUN_S:
        for producer in producers:  # offer about twice the quota across the instances
            for _ in range(8):
                offered += len(value)  # what the application tries to send
                try:
                    producer.produce(topic, value=value, on_delivery=delivered)
                except BufferError:  # the client's queue is full: it is being throttled
                    break
            producer.poll(0)
        target = 2 * RATE * (time.monotonic() - started)
        if offered > target:
            time.sleep(0.01)
    elapsed = time.monotonic() - started
    for producer in producers:
        producer.purge(in_queue=True)  # what was never sent does not count
        producer.flush(30)
    allowed = BURST + RATE * elapsed
    # The gateway admits produce bytes at the quota (frames are a little larger than the
    # values: record batch overhead), and the client sees the throttle in its statistics.
    assert offered > 1.8 * allowed, "the producers did not push twice the quota"
    print(
        f"admitted {acked[0]} bytes of {offered} offered; quota allows {allowed:.0f}"
        f" (ratio {acked[0] / allowed:.3f})"
    )
    assert 0.90 * allowed <= acked[0] <= 1.10 * allowed, (acked[0], allowed)
    throttled = [
        b for s in stats for b in s.get("brokers", {}).values()  # type: ignore[attr-defined]
        if b.get("throttle", {}).get("max", 0) > 0
    ]  # fmt: skip
    assert throttled, "throttle_time_ms never reached the client's statistics"
