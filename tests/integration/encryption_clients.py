"""Clients and broker-side checks for the record-encryption end-to-end tests
(``test_encryption_e2e``): produce and consume with librdkafka, look into log segments."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.kafka_cluster import KafkaCluster


def new_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])
    futures[name].result(30)
    return name


def produce(bootstrap: str, topic: str, count: int, tag: str, **conf: Any) -> list[tuple]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, **conf})
    sent = []
    # timestamps of now: records older than the retention (7 days) are deleted by the
    # broker's next retention check (it rolls the active segment to do so), which made
    # a fetch from offset 0 fail with OFFSET_OUT_OF_RANGE at random
    base = int(time.time() * 1000)
    for i in range(count):
        key = f"key-{tag}-{i}".encode()
        value = f"MARKER-{tag}-{i}-".encode() + b"x" * (i % 300)
        headers = [("h1", f"hv-{tag}-{i}".encode()), ("h2", None)]
        producer.produce(topic, value=value, key=key, headers=headers, timestamp=base + i)
        sent.append((key, value, headers, base + i))
    assert producer.flush(60) == 0
    return sent


def consume(bootstrap: str, topic: str, count: int, assign: bool = True, **conf: Any) -> list[Any]:
    """Up to ``count`` messages (or the first error): with ``assign`` (the default) from
    offset 0 of partition 0, or by group subscription (``assign=False``). Reading
    through a group adds the group's coordination (the first group of a fresh cluster
    waits for ``__consumer_offsets``; a topic just created may not be in the leader's
    metadata when it assigns, and then nothing is assigned until a metadata refresh):
    what these tests check is the data path, so only one test reads through a group,
    with a deadline of its own for the assignment and a failure that says which of
    the two never came."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf,
        }
    )
    if assign:
        consumer.assign([TopicPartition(topic, 0, 0)])
    else:
        consumer.subscribe([topic])
    got: list[Any] = []
    assigned = assign
    deadline = time.monotonic() + (90 if assign else 180)
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if not assigned and consumer.assignment():
                assigned = True
                deadline = time.monotonic() + 90  # from the assignment on: the data path
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                got.append(msg.error())
                break
            got.append(msg)
        assert assigned, f"the group never assigned {topic} (coordination, not records)"
    finally:
        consumer.close()
    return got


def as_sent(msgs: list[Any]) -> list[tuple]:
    return [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in msgs]


def segments_contain(cluster: KafkaCluster, topic: str, needle: bytes) -> bool:
    found = False
    dirs = list(cluster.workdir.glob(f"node-*/data/{topic}-*"))
    assert dirs, f"no log directories for {topic}"
    for segment in (f for d in dirs for f in d.glob("*.log")):
        found = found or needle in segment.read_bytes()
    return found


def sealed_per_batch(direct: list[Any]) -> bool:
    """What a direct consumer gets of batches sealed whole (wire format 2): envelopes
    and placeholders, no keys, no headers."""
    return bool(direct) and all(
        m.key() is None
        and not m.headers()
        and (m.value() is None or (m.value()[:4] == b"KGE\x02" and b"MARKER" not in m.value()))
        for m in direct
    )
