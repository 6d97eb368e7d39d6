"""Protocol facts checked against the real cluster through the gateway, with a raw client."""

from __future__ import annotations

import asyncio
import datetime
import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_cluster.v1.response import DescribeClusterResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorV3
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as FindCoordinatorV3Resp
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.protocol.apis import gateway_apis

from ..conftest import assert_only_gateway_addresses
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration


async def test_api_versions_is_the_intersection(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    request = ApiVersionsRequest(client_software_name="kgw-test", client_software_version="1")
    through = await RawConnection.open(gateway.bootstrap)
    direct = await RawConnection.open(kafka_cluster.bootstrap_servers.split(",")[0])
    try:
        ours = await through.request(request, ApiVersionsResponse)
        theirs = await direct.request(request, ApiVersionsResponse)
    finally:
        through.close()
        direct.close()
    assert ours.error_code == ErrorCode.none
    cluster = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in theirs.api_keys}
    supported = gateway_apis()
    advertised = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in ours.api_keys}
    assert advertised, "nothing advertised"
    for key, (low, high) in advertised.items():
        assert key in supported and key in cluster
        assert low == max(cluster[key][0], supported[key].min_version)
        assert high == min(cluster[key][1], supported[key].max_version)
    # The cluster offers APIs the gateway must hide (SASL until it terminates SASL itself,
    # Raft/controller APIs, delegation tokens, broker SCRAM admin, telemetry).
    hidden = set(cluster) - set(advertised)
    assert {17, 36, 38, 50, 71, 72} & set(cluster) <= hidden
    assert ours.finalized_features == theirs.finalized_features


async def test_find_coordinator_and_describe_cluster_are_rewritten(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    conn = await RawConnection.open(gateway.bootstrap)
    seen: set[str] = set()
    try:
        for _ in range(30):  # the offsets topic is created on first use
            new = await conn.request(
                FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("g-raw",)),
                FindCoordinatorResponse,
            )
            if new.coordinators[0].error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.5)
        assert new.coordinators[0].error_code == ErrorCode.none
        seen |= {f"{c.host}:{c.port}" for c in new.coordinators}
        old = await conn.request(
            FindCoordinatorV3(key="g-raw", key_type=i8(0)), FindCoordinatorV3Resp
        )
        assert old.error_code == ErrorCode.none
        seen.add(f"{old.host}:{old.port}")
        cluster = await conn.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False),
            DescribeClusterResponse,
        )
        seen |= {f"{b.host}:{b.port}" for b in cluster.brokers}
        assert len(cluster.brokers) == len(kafka_cluster.pids)
    finally:
        conn.close()
    assert_only_gateway_addresses(seen, gateway, kafka_cluster)


async def test_every_broker_port_serves_its_own_broker(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # keep it alive until done
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(30)
    conn = await RawConnection.open(gateway.bootstrap)
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    try:
        metadata = await conn.request(request, MetadataResponse)
    finally:
        conn.close()
    brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
    assert_only_gateway_addresses(set(brokers.values()), gateway, kafka_cluster)
    # Each public port leads to the broker with that node id: ask each for the
    # controller/cluster view and compare with a direct connection's.
    for node_id, address in brokers.items():
        assert address.endswith(f":{gateway.public_port(node_id)}")
        conn = await RawConnection.open(address)
        try:
            response = await conn.request(request, MetadataResponse)
        finally:
            conn.close()
        assert {int(b.node_id) for b in response.brokers} == set(brokers)


async def test_unknown_api_key_gets_unsupported_version(gateway: GatewayProcess) -> None:
    conn = await RawConnection.open(gateway.bootstrap)
    try:
        await conn.send_raw(struct.pack(">ihhih", 10, 999, 0, 42, -1))
        frame = await conn.read_frame()
        assert struct.unpack(">ih", frame) == (42, ErrorCode.unsupported_version)
        assert await conn.closed_by_peer()
    finally:
        conn.close()


async def test_acks_zero_produce_does_not_stall_the_next_response(gateway: GatewayProcess) -> None:
    conn = await RawConnection.open(gateway.bootstrap)
    produce = ProduceRequest(
        transactional_id=None, acks=i16(0), timeout=datetime.timedelta(seconds=5), topic_data=()
    )
    metadata = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    try:
        await conn.send(produce)  # no response will ever come for this one
        response = await conn.request(metadata, MetadataResponse, timeout_s=10)
    finally:
        conn.close()
    assert response.brokers


async def test_acks_zero_with_a_real_producer(gateway: GatewayProcess, topic: str) -> None:
    from confluent_kafka import Consumer, Producer

    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # keep it alive until done
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "acks": 0, "linger.ms": 0})
    for i in range(2000):
        producer.produce(topic, value=str(i).encode())
        producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": gateway.bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = 0
    deadline = asyncio.get_running_loop().time() + 60
    while seen < 2000 and asyncio.get_running_loop().time() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.close()
    assert seen == 2000  # acks=0 over loopback to a healthy cluster loses nothing
