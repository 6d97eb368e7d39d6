"""Acceptance with confluent-kafka (librdkafka): the full round trip through the gateway that
``roundtrip_checks`` describes and verifies."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import TopicPartition as CfTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.conftest import assert_only_gateway_addresses
from tests.integration.roundtrip_checks import (
    BATCH,
    PARTITIONS,
    RECORDS,
    REPLICAS,
    GroupLog,
    Record,
    ThreadedGroup,
    assert_broker_ports,
    gateway_addresses,
    leaving,
    next_offsets,
    prefixed_key,
    record,
    run_threaded_group,
    verify_group,
    wait_until,
)

pytestmark = pytest.mark.integration

# -- confluent-kafka --------------------------------------------------------------------------


class ConfluentAddresses:
    """Broker addresses librdkafka learned (from its statistics), by kind."""

    def __init__(self) -> None:
        self.learned: set[str] = set()
        self.configured: set[str] = set()
        self._lock = threading.Lock()

    def on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        with self._lock:
            for broker in stats.get("brokers", {}).values():
                name = broker.get("nodename") or ""
                if not name:
                    continue
                target = self.configured if broker.get("source") == "configured" else self.learned
                target.add(name)


def cf_config(bootstrap: str, addresses: ConfluentAddresses, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "statistics.interval.ms": 1000,
        "stats_cb": addresses.on_stats,
        **more,
    }


def cf_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: threading.Event,
    addresses: ConfluentAddresses,
) -> None:
    consumer = Consumer(
        cf_config(
            bootstrap,
            addresses,
            **{
                "group.id": group,
                "client.id": f"{group}-m{member}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            },
        )
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, parts: log.assigned(member, [p.partition for p in parts]),
        on_revoke=lambda _c, parts: log.revoked(member, [p.partition for p in parts]),
    )
    try:
        while not stop.is_set():
            records = []
            for msg in consumer.consume(BATCH, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                records.append(_cf_record(msg))
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            tps = [CfTopicPartition(topic, p, o) for p, o in offsets.items()]
            try:
                done = consumer.commit(offsets=tps, asynchronous=False)
                errors = [str(tp.error) for tp in done or [] if tp.error is not None]
                log.commit(member, batch, offsets, "; ".join(errors))
            except KafkaException as exc:
                log.commit(member, batch, offsets, str(exc) or "commit failed")
            if leaving(log, member):
                break
    finally:
        consumer.close()


def _cf_record(msg: Message) -> Record:
    key, value = msg.key(), msg.value()
    assert key is not None and value is not None
    return msg.partition(), msg.offset(), key.decode(), value.decode()


def cf_produce(bootstrap: str, topic: str, addresses: ConfluentAddresses) -> set[str]:
    acked: set[str] = set()
    errors: list[ConfluentError] = []

    def on_delivery(err: ConfluentError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            value = msg.value()
            assert value is not None
            acked.add(value.decode())

    producer = Producer(cf_config(bootstrap, addresses, acks="all", **{"linger.ms": 20}))
    for i in range(RECORDS):
        key, value = record("cf", i)
        while True:
            try:
                producer.produce(topic, value.encode(), key.encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0, "records still undelivered 120 s after the last produce"
    assert errors == [], f"{len(errors)} delivery errors, first: {errors[:3]}"
    return acked


def test_confluent_kafka_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    addresses = ConfluentAddresses()
    admin = AdminClient(cf_config(bootstrap, addresses))
    admin.create_topics([NewTopic(topic, PARTITIONS, REPLICAS)])[topic].result(60)

    def topic_ready() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        return (
            meta.error is None
            and len(meta.partitions) == PARTITIONS
            and all(len(p.replicas) == REPLICAS for p in meta.partitions.values())
        )

    wait_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS}x{REPLICAS} replicas")
    meta = admin.list_topics(timeout=30)
    assert_broker_ports({b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}, gateway)
    cluster = admin.describe_cluster().result(30)
    described = {n.id: f"{n.host}:{n.port}" for n in cluster.nodes}
    assert_broker_ports(described, gateway)
    seen = set(described.values()) | {f"{b.host}:{b.port}" for b in meta.brokers.values()}

    group = f"cf-{uuid.uuid4().hex[:8]}"

    def members() -> int:
        info = admin.describe_consumer_groups([group])[group].result(30)
        seen.add(f"{info.coordinator.host}:{info.coordinator.port}")
        return len(info.members)

    log, acked, final = run_threaded_group(
        ThreadedGroup(
            member=lambda m, log, stop: cf_member(bootstrap, topic, group, m, log, stop, addresses),
            produce=lambda: cf_produce(bootstrap, topic, addresses),
            committed=lambda: _cf_committed(admin, group, topic),
            ends=lambda: _cf_ends(admin, topic),
            members=members,
        )
    )
    report = verify_group(log, acked, prefixed_key, final)
    print(f"confluent-kafka group: {report}")

    assert addresses.learned, "librdkafka reported no broker statistics"
    assert addresses.configured <= {bootstrap}, addresses.configured
    assert addresses.learned <= gateway_addresses(gateway), addresses.learned
    assert_only_gateway_addresses(seen | addresses.learned, gateway, kafka_cluster)


def _cf_committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [CfTopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _cf_ends(admin: AdminClient, topic: str) -> dict[int, int]:
    specs = {CfTopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(specs).items()}
