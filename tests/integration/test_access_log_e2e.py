"""Access-log records and metrics from real client sessions through the gateway."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory
from .rawkafka import known_everywhere

pytestmark = pytest.mark.integration
REQUEST_FIELDS = {
    "v", "ts", "type", "event", "instance", "conn", "listener", "client_host", "client_port",
    "principal", "client_id", "api", "api_version", "correlation_id", "decision", "error_code",
    "bytes_in", "bytes_out", "records", "throttle_ms", "latency_ms",
}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _records(directory: Path) -> list[dict[str, object]]:
    lines = []
    for path in sorted(directory.glob("*")):
        lines.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return lines


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_real_sessions_are_logged_and_counted(
    gateway_factory: GatewayFactory, kafka_cluster: KafkaCluster, tmp_path: Path, topic: str
) -> None:
    logs = tmp_path / "access"
    port = _free_port()
    gateway = gateway_factory(
        accesslog={"path": str(logs / "access.log"), "max_bytes": 1 << 20, "max_files": 3},
        metrics={"enabled": True, "port": port},
    )
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)
    # Every broker must know the topic before producing: a Produce answered "not leader"
    # is retried by the client and rightly logged again, which would spoil the count.
    asyncio.run(known_everywhere(list(kafka_cluster.brokers.values()), topic))
    producer = Producer(
        {"bootstrap.servers": gateway.bootstrap, "client.id": "e2e-producer", "linger.ms": 5}
    )
    for i in range(1000):
        producer.produce(topic, key=str(i % 7).encode(), value=b"v" * 100)
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": gateway.bootstrap, "group.id": topic, "client.id": "e2e-consumer",
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 1000 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    consumer.close()
    assert got == 1000

    ready = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5)
    assert ready.status == 200
    deadline = time.monotonic() + 30  # the writer drains off the data path
    produced: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        records = _records(logs)
        produced = [r for r in records if r.get("api") == "produce"]
        if sum(int(r["records"] or 0) for r in produced) >= 1000:  # type: ignore[call-overload]
            break
        time.sleep(0.2)
    assert sum(int(r["records"] or 0) for r in produced) == 1000  # type: ignore[call-overload]
    for record in produced:
        assert set(record) >= REQUEST_FIELDS, REQUEST_FIELDS - set(record)
        assert record["client_id"] == "e2e-producer" and record["principal"] == "User:ANONYMOUS"
        assert record["client_host"] == "127.0.0.1" and record["error_code"] == 0
    fetched = [r for r in records if r.get("api") == "fetch"]
    assert sum(int(r["records"] or 0) for r in fetched) >= 1000  # type: ignore[call-overload]
    events = {r["event"] for r in records if r["type"] == "connection"}
    assert "open" in events

    deadline = time.monotonic() + 30  # scrape and log agree once the writer caught up
    while True:
        samples = _samples(port)
        counted = sum(
            v for (name, labels), v in samples.items()
            if name == "kgw_requests_total" and ("api", "produce") in labels
        )  # fmt: skip
        logged = len([r for r in _records(logs) if r.get("api") == "produce"])
        if counted == logged or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    counted = sum(
        v for (name, labels), v in samples.items()
        if name == "kgw_requests_total" and ("api", "produce") in labels
    )  # fmt: skip
    logged = len([r for r in _records(logs) if r.get("api") == "produce"])
    assert counted == logged
    produced_records = sum(
        v for (name, labels), v in samples.items()
        if name == "kgw_records_total" and ("api", "produce") in labels
    )  # fmt: skip
    assert produced_records == 1000
    open_now = sum(v for (name, _), v in samples.items() if name == "kgw_open_connections")
    assert open_now >= 0
