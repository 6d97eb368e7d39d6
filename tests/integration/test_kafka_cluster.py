"""The dev-stack KRaft cluster against real Kafka processes and real clients.

The cluster here is this module's own: the tests kill and add brokers, so they
must not share the session cluster other integration tests use. Missing java or
mvn makes the fixture raise, so the tests fail rather than skip.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from gateway.devstack.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    kafka = KafkaCluster(tmp_path_factory.mktemp("kafka"))
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _broker_ids(bootstrap: str) -> set[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=30).brokers)


def _create_topic(cluster: KafkaCluster, topic: str, *args: str) -> None:
    base = ["--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", topic]
    done = cluster.run_tool("topics", [*base, *args], timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def _produce(bootstrap: str, topic: str, records: dict[bytes, bytes]) -> None:
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in records.items():
        producer.produce(topic, value, key, on_delivery=on_delivery)
    assert producer.flush(60) == 0, "records still undelivered after 60 s"
    assert errors == []


def _consume(bootstrap: str, topic: str, count: int) -> dict[bytes, bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kgw-test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: dict[bytes, bytes] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            got[key] = value
    finally:
        consumer.close()
    return got


def test_cluster_serves_metadata_for_every_broker(cluster: KafkaCluster) -> None:
    assert set(cluster.brokers) == {1, 2, 3}
    assert cluster.bootstrap_servers == ",".join(
        f"127.0.0.1:{port}" for _, port in cluster.brokers.values()
    )
    assert set(cluster.pids) == {1, 2, 3}
    assert _broker_ids(cluster.bootstrap_servers) == {1, 2, 3}
    quorum = cluster.run_tool(
        "metadata-quorum", ["--bootstrap-server", cluster.bootstrap_servers, "describe", "--status"]
    )
    assert quorum.returncode == 0, quorum.stderr.decode(errors="replace")
    assert b"CurrentVoters:" in quorum.stdout


def test_topic_tool_then_produce_and_consume(cluster: KafkaCluster) -> None:
    topic = "devstack-roundtrip"
    _create_topic(cluster, topic, "--partitions", "6", "--replication-factor", "3")
    described = cluster.run_tool(
        "topics", ["--bootstrap-server", cluster.bootstrap_servers, "--describe", "--topic", topic]
    )
    assert described.returncode == 0, described.stderr.decode(errors="replace")
    assert b"PartitionCount: 6" in described.stdout
    assert b"ReplicationFactor: 3" in described.stdout

    records = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(30)}
    _produce(cluster.bootstrap_servers, topic, records)
    assert _consume(cluster.bootstrap_servers, topic, len(records)) == records


def test_killed_broker_restarts_and_rejoins(cluster: KafkaCluster) -> None:
    topic = "devstack-failover"
    _create_topic(cluster, topic, "--partitions", "3", "--replication-factor", "3")
    old_pid = cluster.pids[3]

    cluster.kill_broker(3)
    assert 3 not in cluster.pids
    # Two of three replicas still meet min.insync.replicas=2 for acks=all.
    _produce(cluster.bootstrap_servers, topic, {b"during": b"outage"})

    cluster.start_broker(3)
    assert cluster.pids[3] != old_pid
    assert _broker_ids(f"127.0.0.1:{cluster.brokers[3][1]}") >= {1, 2, 3}
    _produce(cluster.bootstrap_servers, topic, {b"after": b"restart"})
    assert _consume(cluster.bootstrap_servers, topic, 2) == {
        b"during": b"outage",
        b"after": b"restart",
    }


def test_added_broker_joins_and_leads_a_partition(cluster: KafkaCluster) -> None:
    node_id = cluster.add_broker()

    assert node_id == 4
    assert set(cluster.pids) == {1, 2, 3, 4}
    assert _broker_ids(cluster.bootstrap_servers) == {1, 2, 3, 4}
    # A partition whose preferred leader is the new broker proves it serves data.
    topic = "devstack-new-broker"
    _create_topic(cluster, topic, "--replica-assignment", "4:1:2")
    _produce(cluster.bootstrap_servers, topic, {b"k": b"on broker 4"})
    assert _consume(cluster.bootstrap_servers, topic, 1) == {b"k": b"on broker 4"}
