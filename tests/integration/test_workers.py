"""``kgw serve`` with ``server.workers: 2`` on the real cluster (decision 0030): a Redis
quota holds across connections spread over both workers; a worker killed with SIGKILL
under an acks=all producer is replaced and no acknowledged record is lost; SIGTERM
drains both workers; ``/metrics`` reports the group. (SIGHUP reaching every worker:
``tls/test_tls_workers.py``.)"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import gateway_log_events
from ..redis_server import RedisServer
from . import workerprocs as wp

pytestmark = pytest.mark.integration
# As test_quota_throttling_e2e's three instances: 1 MB/s, three producers (there, one per
# instance; here, all on one host's workers). Low rates (100 kB/s) and the sustained rate
# on one worker, two workers and two instances: test_quota_rate.py (decision 0038).
RATE = 1_000_000  # produce bytes/s for every client together
BURST = 500_000
RUN_S = 30.0
PRODUCERS = 3


Start = Callable[..., tuple[GatewayProcess, int]]


@pytest.fixture
def two_workers(kafka_cluster: KafkaCluster, tmp_path: Path) -> Iterator[Start]:
    """``two_workers(**sections)``: a gateway with two workers on the shared cluster."""
    started: list[GatewayProcess] = []

    def start(**overrides: Any) -> tuple[GatewayProcess, int]:
        gateway, port = wp.start_gateway(kafka_cluster, tmp_path / "gw", **overrides)
        started.append(gateway)
        return gateway, port

    yield start
    for gateway in started:
        gateway.stop()


def per_worker(gateway: GatewayProcess, prefix: str) -> dict[int, float]:
    assert gateway.pid is not None
    figures = {}
    for slot, pid in wp.workers(gateway.pid).items():
        port = wp.metrics_port(pid)
        assert port is not None
        figures[slot] = wp.metric(wp.get(port, "/metrics")[1], prefix)
    return figures


def test_a_quota_holds_across_both_workers(
    two_workers: Start, redis: RedisServer, topic: str
) -> None:
    quotas = {
        "redis_url": redis.url,
        "key_prefix": f"kgw:workers:{topic}:",
        "default_plan": "metered",
        "plans": {"metered": {"produce_bytes": RATE, "produce_bytes_burst": BURST}},
        "redis_timeout_s": 2.0,  # the host is shared: a slow answer is not an outage
    }
    gateway, metrics = two_workers(quotas=quotas)
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # kept until the result
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)
    producers = [
        Producer(
            {
                "bootstrap.servers": gateway.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 16384,
                "queue.buffering.max.kbytes": 4096,
            }
        )
        for _ in range(PRODUCERS)
    ]
    acked = [0]

    def delivered(err: object, message: Any) -> None:
        if err is None:
            acked[0] += len(message.value())

    value, offered, started = b"x" * 1000, 0, time.monotonic()
    while time.monotonic() - started < RUN_S:
        for producer in producers:
            for _ in range(8):
                offered += len(value)
                try:
                    producer.produce(topic, value=value, on_delivery=delivered)
                except BufferError:  # throttled: the client's queue is full
                    break
            producer.poll(0)
        if offered > 2 * RATE * (time.monotonic() - started):
            time.sleep(0.01)
    elapsed = time.monotonic() - started
    for producer in producers:
        producer.purge(in_queue=True)
        producer.flush(30)
    allowed = BURST + RATE * elapsed
    produced = per_worker(gateway, 'kgw_request_bytes_total{api="produce"')
    print(f"admitted {acked[0]} of {offered} offered; allowed {allowed:.0f} "
          f"(ratio {acked[0] / allowed:.3f}); Produce bytes per worker {produced}")  # fmt: skip
    assert offered > 1.8 * allowed, "the producers did not push twice the quota"
    assert len(produced) == 2 and all(v > 0.1 * RATE for v in produced.values()), produced
    assert 0.90 * allowed <= acked[0] <= 1.10 * allowed, (acked[0], allowed)
    group = wp.metric(wp.get(metrics, "/metrics")[1], 'kgw_request_bytes_total{api="produce"')
    assert group == pytest.approx(sum(produced.values()), rel=0.01)  # the group, not one


class Traffic:
    """One idempotent acks=all producer and one consumer, each in its own thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self.consumed: set[bytes] = set()
        self.stop_producing, self.stop_consuming = threading.Event(), threading.Event()
        self.producer = threading.Thread(target=self._produce, daemon=True)
        self.consumer = threading.Thread(target=self._consume, daemon=True)

    def _produce(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 1000,
        })  # fmt: skip

        def report(err: Any, message: Any) -> None:
            if err is None:
                self.acked.add(message.value())
            else:
                self.failed.append(str(err))

        sequence = 0
        while not self.stop_producing.is_set():
            producer.produce(self.topic, key=str(sequence % 12), value=f"r{sequence}".encode(),
                             on_delivery=report)  # fmt: skip
            sequence += 1
            producer.poll(0.002)
        assert producer.flush(120) == 0

    def _consume(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"workers-{self.topic}",
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
        })  # fmt: skip
        consumer.subscribe([self.topic])
        while not self.stop_consuming.is_set():
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value():
                self.consumed.add(message.value())
        consumer.close()

    def finish(self) -> set[bytes]:
        """Stop producing, read until every acknowledged record is consumed: the lost ones."""
        self.stop_producing.set()
        self.producer.join(150)
        assert not self.producer.is_alive()
        deadline = time.monotonic() + 90
        while not self.acked <= self.consumed and time.monotonic() < deadline:
            time.sleep(0.5)
        self.stop_consuming.set()
        self.consumer.join(30)
        return self.acked - self.consumed


def test_a_killed_worker_is_replaced_and_no_acknowledged_record_is_lost(
    two_workers: Start, topic: str
) -> None:
    gateway, metrics = two_workers()
    assert gateway.pid is not None
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    traffic = Traffic(gateway.bootstrap, topic)
    traffic.consumer.start()
    traffic.producer.start()
    time.sleep(4)
    before = wp.workers(gateway.pid)
    connections = per_worker(gateway, "kgw_open_connections{")
    victim = max(connections, key=lambda slot: connections[slot])  # the busier one
    served_before = wp.metric(wp.get(metrics, "/metrics")[1], "kgw_connections_total{")
    acked_before = len(traffic.acked)
    os.kill(before[victim], signal.SIGKILL)
    after = wp.wait_workers(gateway.pid, 2, wp.START_TIMEOUT_S)
    assert after[victim] != before[victim] and after[1 - victim] == before[1 - victim]
    time.sleep(4)
    assert len(traffic.acked) > acked_before, "production stalled after the kill"
    text = wp.get(metrics, "/metrics")[1]
    assert wp.metric(text, "kgw_worker_restarts_total") == 1
    assert wp.metric(text, "kgw_connections_total{") >= served_before  # never backwards
    lost = traffic.finish()
    print(f"{len(traffic.acked)} acknowledged, {len(traffic.consumed)} consumed; "
          f"open connections per worker before the kill {connections}")  # fmt: skip
    assert connections[victim] > 0, "the killed worker had no client: nothing was tested"
    assert len(traffic.acked) > 500
    assert not lost, f"{len(lost)} acknowledged records never consumed, e.g. {sorted(lost)[:5]}"
    assert not traffic.failed, traffic.failed[:5]


def test_sigterm_drains_both_workers(two_workers: Start, topic: str) -> None:
    gateway, metrics = two_workers()
    assert gateway.pid is not None
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # kept until the result
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    traffic = Traffic(gateway.bootstrap, topic)
    traffic.consumer.start()  # a fetch long-poll in flight while the workers drain
    time.sleep(3)
    pids = wp.workers(gateway.pid)
    assert wp.get(metrics, "/readyz")[0] == 200
    started = time.monotonic()
    assert gateway.stop(timeout=60) == 0, gateway.log_tail()  # exit 0: drained, not killed
    elapsed = time.monotonic() - started
    assert not any(wp.workers(pid) for pid in pids.values())
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids.values())
    stopped = {e.get("worker") for e in gateway_log_events(gateway, "stopped")}
    assert stopped >= {0, 1}, stopped  # each worker ran its drain to the end
    assert elapsed < 30, elapsed  # drain_timeout_s is 10
    traffic.stop_consuming.set()
    traffic.consumer.join(30)


@pytest.mark.cluster  # starts gateway processes (no Kafka needed)
def test_a_start_failure_in_the_workers_ends_the_supervisor_with_its_code(tmp_path: Path) -> None:
    from gateway.cli import main

    policies = tmp_path / "policies"
    policies.mkdir()
    repo = Path(__file__).parents[2]
    (policies / "model.conf").write_text((repo / "policies" / "model.conf").read_text())
    (policies / "policy.csv").write_text("p, User:a, TOPIC, SOMETIMES, t, READ, *, allow\n")
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:1']}\n"
        "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
        " advertised_host: localhost, max_node_id: 4}]\n"
        f"authorization: {{policy_dir: '{policies}'}}\n"
    )
    started = time.monotonic()
    assert main(["serve", "--config", str(config), "--workers", "2"]) == 2  # as one process
    assert time.monotonic() - started < 120  # not restarted over and over
