"""Acceptance with kafka-python: the full round trip through the gateway that
``roundtrip_checks`` describes and verifies."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener as KpRebalanceListener
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.conftest import assert_only_gateway_addresses
from tests.integration.roundtrip_checks import (
    BATCH,
    PARTITIONS,
    RECORDS,
    REPLICAS,
    GroupListening,
    GroupLog,
    ThreadedGroup,
    assert_broker_ports,
    leaving,
    next_offsets,
    prefixed_key,
    record,
    run_threaded_group,
    verify_group,
    wait_until,
)

pytestmark = pytest.mark.integration

# -- kafka-python ---------------------------------------------------------------------------


class KpListener(GroupListening, KpRebalanceListener):  # type: ignore[misc]
    """The log's callbacks on this client's listener type."""


def kp_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: threading.Event,
    seen: set[str],
) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"{group}-m{member}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=30_000,
        max_poll_records=BATCH,
    )
    consumer.subscribe([topic], listener=KpListener(log, member))
    try:
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=500)
            records = [
                (r.partition, r.offset, r.key.decode(), r.value.decode())
                for batch in polled.values()
                for r in batch
            ]
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            commit = {
                KpTopicPartition(topic, p): KpOffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
            try:
                consumer.commit(commit)
                log.commit(member, batch, offsets)
            except KpKafkaError as exc:
                log.commit(member, batch, offsets, repr(exc))
            if leaving(log, member):
                break
    finally:
        seen.update(_kp_addresses(consumer._client.cluster))
        coordinator = consumer._client.cluster.broker_metadata(consumer._coordinator.coordinator_id)
        if coordinator is not None:
            seen.add(f"{coordinator.host}:{coordinator.port}")
        consumer.close()


def _kp_addresses(cluster: Any) -> set[str]:
    return {f"{b.host}:{b.port}" for b in cluster.brokers()}


def kp_produce(bootstrap: str, topic: str, seen: set[str]) -> set[str]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024
    )
    try:
        futures = []
        for i in range(RECORDS):
            key, value = record("kp", i)
            futures.append((value, producer.send(topic, key=key.encode(), value=value.encode())))
        producer.flush(timeout=180)
        failed = [(v, f.exception) for v, f in futures if not f.succeeded()]
        assert not failed, f"{len(failed)} records not acknowledged, first: {failed[:3]}"
        seen.update(_kp_addresses(producer._metadata))
    finally:
        producer.close(timeout=30)
    return {value for value, _ in futures}


def test_kafka_python_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        created = admin.create_topics([KpNewTopic(topic, PARTITIONS, REPLICAS)])
        assert [t["error_code"] for t in created["topics"]] == [0], created

        def topic_ready() -> bool:
            (described,) = admin.describe_topics([topic])
            parts = described["partitions"]
            return (
                described["error_code"] == 0
                and len(parts) == PARTITIONS
                and all(len(p["replica_nodes"]) == REPLICAS for p in parts)
            )

        wait_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS}x{REPLICAS}")
        cluster = admin.describe_cluster()
        described = {b["broker_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
        assert_broker_ports(described, gateway)
        metadata = {b.node_id: f"{b.host}:{b.port}" for b in admin._client.cluster.brokers()}
        assert_broker_ports(metadata, gateway)
        seen = set(described.values()) | set(metadata.values())

        group = f"kp-{uuid.uuid4().hex[:8]}"
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]

        def committed() -> dict[int, int]:
            offsets = admin.list_group_offsets({group: None})[group]
            return {tp.partition: meta.offset for tp, meta in offsets.items()}

        def ends() -> dict[int, int]:
            return {tp.partition: o for tp, o in offsets_reader.end_offsets(tps).items()}

        offsets_reader = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kp-offsets")
        try:
            log, acked, final = run_threaded_group(
                ThreadedGroup(
                    member=lambda m, log, stop: kp_member(
                        bootstrap, topic, group, m, log, stop, seen
                    ),
                    produce=lambda: kp_produce(bootstrap, topic, seen),
                    committed=committed,
                    ends=ends,
                    members=lambda: len(admin.describe_groups([group])[group]["members"]),
                )
            )
        finally:
            offsets_reader.close()
    finally:
        admin.close()
    report = verify_group(log, acked, prefixed_key, final)
    print(f"kafka-python group: {report}")
    assert_only_gateway_addresses(seen, gateway, kafka_cluster)
