"""A Redis produce quota holds its rate within ±10 % over a sustained window: at a low
rate (100 kB/s) and a high one, on one worker, spread over two workers, and spread
over two gateway instances. Real cluster, real Redis, real producers (librdkafka,
Kafka's default batch size, five requests in flight per connection, acks=1: the
quota is the same with acks=all, whose seconds-long latencies on this shared host
would cap the offered load below the high rate) offering about twice the quota.
The rate is what the gateway admitted — its quota engine's own count of produce
bytes charged (``kgw_quota_charged_total``), taken when a request is forwarded; the
per-request metric counts at the response, a broker round trip later, and that lag
varies by seconds under load — over a window after the burst is spent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory
from ..redis_server import RedisServer, free_port
from . import workerprocs as wp

pytestmark = pytest.mark.integration
LOW, HIGH = 100_000, 1_000_000  # produce bytes/s (high: what this shared host can carry)
WARM_S, WINDOW_S = 6.0, 16.0  # the burst is spent first; then the sustained window
PRODUCERS = 3
PRODUCED = 'kgw_quota_charged_total{kind="produce_bytes"'  # counted when admitted
THROTTLED = 'kgw_quota_throttled_total{kind="produce_bytes"'


def _quotas(redis: RedisServer, topic: str, rate: int) -> dict[str, Any]:
    return {
        "redis_url": redis.url,
        "key_prefix": f"kgw:rate:{topic}:",
        "default_plan": "metered",
        "plans": {"metered": {"produce_bytes": rate, "produce_bytes_burst": rate / 2}},
        "redis_timeout_s": 2.0,  # the host is shared: a slow answer is not an outage
    }


Counter = Callable[[], tuple[float, float]]  # (Produce bytes, produce throttles) so far


class Offer:
    """Producers offering about twice ``rate`` in 1000-byte records, in one thread."""

    def __init__(self, bootstraps: list[str], topic: str, rate: int) -> None:
        self.rate, self.topic = rate, topic
        self.producers = [
            Producer({"bootstrap.servers": bootstraps[i % len(bootstraps)], "acks": 1,
                      "linger.ms": 50, "batch.size": 16384, "queue.buffering.max.kbytes": 8192})
            for i in range(PRODUCERS)
        ]  # fmt: skip
        self.offered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        value, started = b"x" * 1000, time.monotonic()
        while not self.stop.is_set():
            for producer in self.producers:
                for _ in range(8):
                    try:
                        producer.produce(self.topic, value=value)
                    except BufferError:  # the client's queue is full: it is throttled
                        break
                    self.offered += len(value)
                producer.poll(0)
            if self.offered > 2 * self.rate * (time.monotonic() - started):
                time.sleep(0.005)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for producer in self.producers:
            producer.purge(in_queue=True)
            producer.flush(0)
        self.producers.clear()  # gone now, not when a failed test's traceback is dropped


def measure(bootstraps: list[str], counter: Counter, topic: str, rate: int) -> float:
    """Offer twice ``rate``; the rate admitted over the window, as a fraction of ``rate``."""
    admin = AdminClient({"bootstrap.servers": bootstraps[0]})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(30)
    offer = Offer(bootstraps, topic, rate)
    offer.thread.start()
    try:
        time.sleep(WARM_S)
        (first, throttles), started = counter(), time.monotonic()
        time.sleep(WINDOW_S)
        (last, throttled), elapsed = counter(), time.monotonic() - started
        offered = offer.offered
    finally:
        offer.finish()
    ratio = (last - first) / elapsed / rate
    print(f"quota {rate} B/s: admitted {(last - first) / elapsed:.0f} B/s over {elapsed:.1f} s"
          f" (ratio {ratio:.3f}); offered {offered} bytes in total;"
          f" {throttled - throttles:.0f} throttled requests in the window")  # fmt: skip
    # Over the quota all along (else a low ratio would be the host's speed, not the quota's)
    assert throttled - throttles >= WINDOW_S, "the quota hardly throttled: the load was too low"
    assert offered > 1.5 * rate * (WARM_S + WINDOW_S), "the producers did not push past the quota"
    return ratio


def _scrape(ports: list[int]) -> Counter:
    def counter() -> tuple[float, float]:
        produced = throttled = 0.0
        for port in ports:
            status, text = wp.get(port, "/metrics")
            assert status == 200, f"no metrics from port {port}"
            produced += wp.metric(text, PRODUCED)
            throttled += wp.metric(text, THROTTLED)
        return produced, throttled

    return counter


def _instances(
    factory: GatewayFactory, count: int, quotas: dict[str, Any]
) -> tuple[list[str], Counter]:
    ports = [free_port() for _ in range(count)]
    gateways = [
        factory(quotas=quotas | {"expected_instances": count}, metrics={"port": port})
        for port in ports
    ]
    return [g.bootstrap for g in gateways], _scrape(ports)


@pytest.mark.parametrize("rate", [LOW, HIGH], ids=["low", "high"])
def test_one_worker_holds_the_rate(
    gateway_factory: GatewayFactory, redis: RedisServer, topic: str, rate: int
) -> None:
    bootstraps, counter = _instances(gateway_factory, 1, _quotas(redis, topic, rate))
    assert 0.90 <= measure(bootstraps, counter, topic, rate) <= 1.10


@pytest.mark.parametrize("rate", [LOW, HIGH], ids=["low", "high"])
def test_two_instances_hold_one_rate(
    gateway_factory: GatewayFactory, redis: RedisServer, topic: str, rate: int
) -> None:
    bootstraps, counter = _instances(gateway_factory, 2, _quotas(redis, topic, rate))
    assert 0.90 <= measure(bootstraps, counter, topic, rate) <= 1.10


@pytest.mark.parametrize("rate", [LOW, HIGH], ids=["low", "high"])
def test_two_workers_hold_one_rate(
    kafka_cluster: KafkaCluster, tmp_path: Path, redis: RedisServer, topic: str, rate: int
) -> None:
    gateway: GatewayProcess | None = None
    try:
        gateway, _ = wp.start_gateway(
            kafka_cluster, tmp_path / "gw", quotas=_quotas(redis, topic, rate)
        )
        assert gateway.pid is not None
        pids = wp.workers(gateway.pid)
        ports = [wp.metrics_port(pid) for pid in pids.values()]
        assert len(ports) == 2 and all(ports), ports
        counter = _scrape([p for p in ports if p is not None])
        assert 0.90 <= measure([gateway.bootstrap], counter, topic, rate) <= 1.10
    finally:
        if gateway is not None:
            gateway.stop()
