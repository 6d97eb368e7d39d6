"""Acceptance with aiokafka: the full round trip through the gateway that
``roundtrip_checks`` describes and verifies."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.abc import ConsumerRebalanceListener as AioRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.errors import KafkaError as AioKafkaError

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.conftest import assert_only_gateway_addresses
from tests.integration.roundtrip_checks import (
    BATCH,
    FINISH_S,
    GROUP_FORM_S,
    MEMBERS,
    PARTITIONS,
    RECORDS,
    REPLICAS,
    SURVIVORS,
    GroupListening,
    GroupLog,
    assert_broker_ports,
    assert_committed,
    gateway_addresses,
    leaving,
    next_offsets,
    prefixed_key,
    record,
    verify_group,
)

pytestmark = pytest.mark.integration

# -- aiokafka -------------------------------------------------------------------------------


class AioListener(GroupListening, AioRebalanceListener):  # type: ignore[misc]
    """The log's callbacks on this client's listener type."""


def _aio_addresses(client: Any) -> set[str]:
    """Brokers in the client's metadata, and every connection it opened."""
    brokers = {f"{b.host}:{b.port}" for b in client.cluster.brokers()}
    return brokers | {f"{conn.host}:{conn.port}" for conn in client._conns.values()}


async def aio_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: asyncio.Event,
    seen: set[str],
) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"{group}-m{member}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=30_000,
    )
    consumer.subscribe([topic], listener=AioListener(log, member))
    await consumer.start()
    try:
        while not stop.is_set():
            polled = await consumer.getmany(timeout_ms=500, max_records=BATCH)
            records = [
                (r.partition, r.offset, r.key.decode(), r.value.decode())
                for batch in polled.values()
                for r in batch
            ]
            seen.update(_aio_addresses(consumer._client))
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            try:
                await consumer.commit({AioTopicPartition(topic, p): o for p, o in offsets.items()})
                log.commit(member, batch, offsets)
            except AioKafkaError as exc:
                log.commit(member, batch, offsets, repr(exc))
            if leaving(log, member):
                break
    finally:
        await consumer.stop()


async def aio_produce(bootstrap: str, topic: str, seen: set[str]) -> set[str]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        values, futures = [], []
        for i in range(RECORDS):
            key, value = record("aio", i)
            values.append(value)
            futures.append(await producer.send(topic, key=key.encode(), value=value.encode()))
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 180)
        failed = [(v, r) for v, r in zip(values, results, strict=True) if isinstance(r, Exception)]
        assert not failed, f"{len(failed)} records not acknowledged, first: {failed[:3]}"
        seen.update(_aio_addresses(producer.client))
    finally:
        await producer.stop()
    return set(values)


async def _aio_group_members(admin: AIOKafkaAdminClient, group: str) -> int:
    (response,) = await admin.describe_consumer_groups([group])
    (described,) = response.groups
    return len(described[5] if isinstance(described, tuple) else described.members)


async def test_aiokafka_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
    await admin.start()
    offsets_reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aio-offsets")
    await offsets_reader.start()
    group = f"aio-{uuid.uuid4().hex[:8]}"
    log, stop = GroupLog(), asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    seen: set[str] = set()
    try:
        response = await admin.create_topics([AioNewTopic(topic, PARTITIONS, REPLICAS)])
        assert [e[1] for e in response.topic_errors] == [0], response

        async def topic_ready() -> bool:
            await offsets_reader._client.force_metadata_update()
            parts = offsets_reader._client.cluster.partitions_for_topic(topic) or set()
            return len(parts) == PARTITIONS

        await _async_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS} partitions")
        cluster = await admin.describe_cluster()
        described = {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
        assert_broker_ports(described, gateway)
        seen |= set(described.values()) | _aio_addresses(admin._client)

        tasks = [
            asyncio.create_task(aio_member(bootstrap, topic, group, m, log, stop, seen))
            for m in range(MEMBERS)
        ]

        def failed() -> bool:
            return any(t.done() and (t.cancelled() or t.exception()) for t in tasks)

        await _async_until(lambda: log.stable(MEMBERS) or failed(), GROUP_FORM_S, log.describe)
        assert not failed(), [t.exception() for t in tasks if t.done()]
        assert await _aio_group_members(admin, group) == MEMBERS

        acked = await aio_produce(bootstrap, topic, seen)
        assert len(acked) == RECORDS
        tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]

        async def committed() -> dict[int, int]:
            offsets = await admin.list_consumer_group_offsets(group)
            return {tp.partition: meta.offset for tp, meta in offsets.items()}

        async def ends() -> dict[int, int]:
            return {tp.partition: o for tp, o in (await offsets_reader.end_offsets(tps)).items()}

        async def finished() -> bool:
            if failed() or not acked <= log.values:
                return failed()
            return await committed() == await ends()

        await _async_until(finished, FINISH_S, lambda: f"the survivors to finish: {log.describe()}")
        final = log.shares(SURVIVORS)
        assert not failed(), [t.exception() for t in tasks if t.done()]
        assert_committed(await committed(), await ends())
        assert await _aio_group_members(admin, group) == MEMBERS - 1
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await offsets_reader.stop()
        await admin.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    report = verify_group(log, acked, prefixed_key, final)
    print(f"aiokafka group: {report}")
    assert_only_gateway_addresses(seen - {bootstrap}, gateway, kafka_cluster)
    assert seen <= gateway_addresses(gateway), seen


async def _async_until(
    condition: Callable[[], bool | Awaitable[bool]], within: float, what: Callable[[], str]
) -> None:
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if await result if inspect.isawaitable(result) else result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what()}")
        await asyncio.sleep(0.3)
