"""Bad input closes only the connection concerned, with one structured log line,
while a healthy client keeps producing through the same gateway."""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, gateway_log_events
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration

METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


class HealthyProducer:
    """Produces continuously (acks=all) in a thread and counts deliveries."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic = topic
        self.sent = 0
        self.delivered = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: object, _msg: object) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(self.topic, value=b"x" * 100, on_delivery=self._report)
            self.sent += 1
            self.producer.poll(0.005)

    def __enter__(self) -> HealthyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(30)


@pytest.fixture(scope="module")
def healthy_topic(gateway: GatewayProcess) -> str:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    name = f"healthy-{os.getpid()}"
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(30)
    return name


@pytest.fixture
def healthy(gateway: GatewayProcess, healthy_topic: str) -> Iterator[HealthyProducer]:
    with HealthyProducer(gateway.bootstrap, healthy_topic) as producer:
        deadline = time.monotonic() + 30
        while producer.delivered < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert producer.delivered >= 20, "healthy producer never got going"
        yield producer
    assert producer.errors == []
    assert producer.delivered == producer.sent, "acknowledged data must not be lost"


def _closes(gateway: GatewayProcess, payload: bytes) -> bool:
    async def run() -> bool:
        conn = await RawConnection.open(gateway.bootstrap)
        try:
            await conn.send_raw(payload)
            return await conn.closed_by_peer(10)
        finally:
            conn.close()

    return asyncio.run(run())


def _closed_events(gateway: GatewayProcess, since: int) -> list[dict[str, object]]:
    return gateway_log_events(gateway, "connection_closed")[since:]


CASES = {
    "random bytes": os.urandom(64) + b"\x7f\xff\xff\xff",
    "negative length": struct.pack(">i", -1) + b"abcd",
    "oversize length": struct.pack(">i", 2**31 - 1) + b"x" * 16,
    "frame shorter than a header": struct.pack(">i", 3) + b"\x00\x03\x00",
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_frames_close_only_their_connection(
    case: str, gateway: GatewayProcess, healthy: HealthyProducer
) -> None:
    before = len(gateway_log_events(gateway, "connection_closed"))
    delivered_before = healthy.delivered
    payload = CASES[case]
    if case == "random bytes":  # make sure the first 4 bytes are an impossible size
        payload = struct.pack(">i", -7) + payload
    assert _closes(gateway, payload)
    deadline = time.monotonic() + 5
    while len(_closed_events(gateway, before)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    events = _closed_events(gateway, before)
    assert len(events) == 1, events
    assert events[0]["side"] == "client" and events[0]["level"] == "WARNING"
    # the healthy client kept going meanwhile
    deadline = time.monotonic() + 10
    while healthy.delivered < delivered_before + 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert healthy.delivered >= delivered_before + 50


def test_truncated_frame_then_disconnect(gateway: GatewayProcess, healthy: HealthyProducer) -> None:
    sock = socket.create_connection(tuple(gateway.bootstrap.split(":")))  # type: ignore[arg-type]
    sock.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c" + b"partial")
    sock.close()
    before = healthy.delivered
    deadline = time.monotonic() + 10
    while healthy.delivered < before + 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert healthy.delivered >= before + 50
    assert _still_serves(gateway)


def _still_serves(gateway: GatewayProcess) -> bool:
    async def run() -> bool:
        conn = await RawConnection.open(gateway.bootstrap)
        try:
            return bool((await conn.request(METADATA, MetadataResponse)).brokers)
        finally:
            conn.close()

    return asyncio.run(run())


def test_max_request_size_is_configurable(gateway_factory: GatewayFactory) -> None:
    small = gateway_factory(limits={"max_request_bytes": 4096})
    assert _closes(small, struct.pack(">i", 5000) + b"\x00" * 100)
    (event,) = gateway_log_events(small, "connection_closed")
    assert "exceeds the limit of 4096" in str(event["reason"])
    assert _still_serves(small)


def test_idle_connections_are_closed(gateway_factory: GatewayFactory) -> None:
    quick = gateway_factory(limits={"idle_timeout_s": 1.0})

    async def run() -> bool:
        conn = await RawConnection.open(quick.bootstrap)
        try:
            await conn.request(METADATA, MetadataResponse)
            return await conn.closed_by_peer(10)
        finally:
            conn.close()

    assert asyncio.run(run())
    assert any("idle" in str(e["reason"]) for e in gateway_log_events(quick, "connection_closed"))


def test_unreachable_broker_closes_the_client_with_a_log_line(
    gateway_factory: GatewayFactory,
) -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{spare.getsockname()[1]}"  # bound, never listening: refused
        gw = gateway_factory(
            wait_ready=False,
            upstream={"bootstrap_servers": [dead], "connect_timeout_s": 2, "metadata_refresh_s": 2},
        )
        # The gateway knows the brokers from nothing but the dead bootstrap: it is
        # not ready, and a client on the bootstrap port is closed with a log line.
        assert _closes(gw, b"")
    events = gateway_log_events(gw, "connection_closed")
    assert events and events[-1]["side"] == "upstream"
    assert "no broker reachable" in str(events[-1]["reason"])


def test_drain_on_sigterm_delivers_inflight_response(
    gateway_factory: GatewayFactory, kafka_cluster: KafkaCluster, healthy_topic: str
) -> None:
    gw = gateway_factory(shutdown={"drain_timeout_s": 10})

    async def run() -> FetchResponse:
        meta = await RawConnection.open(gw.bootstrap)
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(healthy_topic)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        try:
            metadata = await meta.request(request, MetadataResponse)
        finally:
            meta.close()
        partition = metadata.topics[0].partitions[0]
        leader = next(b for b in metadata.brokers if b.node_id == partition.leader_id)
        conn = await RawConnection.open(f"{leader.host}:{leader.port}")
        fetch = FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=datetime.timedelta(seconds=3),
            min_bytes=i32(1 << 30),  # never satisfied: the broker holds it for max_wait
            max_bytes=i32(1 << 20),
            isolation_level=i8(0),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=(
                FetchTopic(
                    topic=TopicName(healthy_topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        await conn.send(fetch)
        await asyncio.sleep(0.5)
        assert gw.pid is not None
        os.kill(gw.pid, 15)  # SIGTERM while the fetch is held by the broker
        try:
            response = await conn.receive(fetch, FetchResponse, timeout_s=10)
            assert await conn.closed_by_peer(10)
        finally:
            conn.close()
        return response

    response = asyncio.run(run())
    assert response.responses, "the in-flight fetch was answered during the drain"
    assert gw.proc is not None and gw.proc.wait(20) == 0
