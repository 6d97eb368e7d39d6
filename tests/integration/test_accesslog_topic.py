"""The access log's topic sink against the real 3-node cluster: records arrive intact;
a missing topic is counted, not silently lost."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.accesslog.topic import TopicSink
from gateway.accesslog.writer import AccessLog
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.upstream.client import BrokerClient

from .rawkafka import known_everywhere


def _consume(bootstrap: str, topic: str, expected: int, seconds: float = 60) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


async def test_records_reach_the_topic(kafka_cluster: KafkaCluster) -> None:
    topic = f"kgw.access.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
    brokers = list(kafka_cluster.brokers.values())
    await known_everywhere(brokers, topic)
    sink = TopicSink(topic, BrokerClient(brokers), batch_max_bytes=4096)
    access = AccessLog([sink], queue_size=10_000, report_interval_s=3600)
    writer = asyncio.create_task(access.run())
    sent = [{"v": 1, "type": "request", "n": i, "pad": "x" * 50} for i in range(500)]
    for entry in sent:
        access.record(entry)
    await access.close(timeout_s=60)
    await writer
    assert access.dropped_total == 0
    assert access.stats()["topic"].written == 500
    values = await asyncio.to_thread(_consume, kafka_cluster.bootstrap_servers, topic, 500)
    received = sorted((json.loads(v) for v in values), key=lambda e: int(e["n"]))
    assert received == sent


async def test_a_missing_topic_is_counted(kafka_cluster: KafkaCluster) -> None:
    brokers = list(kafka_cluster.brokers.values())
    sink = TopicSink(f"kgw.absent.{uuid.uuid4().hex[:8]}", BrokerClient(brokers), timeout_s=5)
    access = AccessLog([sink], queue_size=100, report_interval_s=3600)
    writer = asyncio.create_task(access.run())
    for i in range(10):
        access.record({"n": i})
    await access.close(timeout_s=30)
    await writer
    assert access.stats()["topic"].dropped == {"sink_error": 10}
