"""The monitoring loops' requests to the brokers, through the gateway's ``BrokerClient``.

Each function sends one kind of request and returns plain data for the pure modules
(``health``, ``lag``); errors are the client's (``BROKER_ERRORS``, ``BrokerUnavailable``)
or ``ProbeError`` for an error code in a response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v4.response import DescribeLogDirsResponse
from kio.schema.describe_quorum.v1.request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kio.schema.describe_quorum.v1.response import DescribeQuorumResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.offset_fetch.v8.response import OffsetFetchResponse
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from ..upstream.client import BROKER_ERRORS, Address, BrokerClient
from .health import PartitionInfo
from .lag import TopicPartition

TOPIC_RESOURCE = 2  # DescribeConfigs resource type
LATEST = -1  # ListOffsets timestamp: the high watermark
QUORUM_TOPIC = "__cluster_metadata"


class ProbeError(Exception):
    """A broker answered with an error code; the message names the request and code."""


class ClusterView:
    """One Metadata answer: brokers, partitions, leaders."""

    def __init__(self, response: MetadataResponse) -> None:
        self.brokers: dict[int, Address] = {
            int(b.node_id): (b.host, int(b.port)) for b in response.brokers
        }
        self.controller = int(response.controller_id)
        self.partitions = [
            PartitionInfo(
                topic=str(t.name),
                partition=int(p.partition_index),
                leader=int(p.leader_id),
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
                offline_replicas=tuple(int(r) for r in p.offline_replicas),
            )
            for t in response.topics
            if not t.error_code and t.name is not None
            for p in t.partitions
        ]

    def leaders(self) -> dict[TopicPartition, int]:
        return {(p.topic, p.partition): p.leader for p in self.partitions}


async def cluster_view(client: BrokerClient) -> ClusterView:
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    return ClusterView(await client.ask(request, MetadataResponse))


async def active_controller(client: BrokerClient) -> int:
    """The KRaft quorum's leader (DescribeQuorum, forwarded by a broker); -1 if unknown."""
    request = DescribeQuorumRequest(
        topics=(
            TopicData(
                topic_name=TopicName(QUORUM_TOPIC),
                partitions=(PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    response = await client.ask(request, DescribeQuorumResponse)
    if response.error_code or not response.topics or not response.topics[0].partitions:
        return -1
    partition = response.topics[0].partitions[0]
    return -1 if partition.error_code else int(partition.leader_id)


async def min_insync_replicas(client: BrokerClient, topics: Iterable[str]) -> dict[str, int]:
    """``min.insync.replicas`` per topic (topics whose answer is an error are left out)."""
    resources = tuple(
        DescribeConfigsResource(
            resource_type=i8(TOPIC_RESOURCE),
            resource_name=topic,
            configuration_keys=("min.insync.replicas",),
        )
        for topic in sorted(set(topics))
    )
    if not resources:
        return {}
    request = DescribeConfigsRequest(resources=resources)
    response = await client.ask(request, DescribeConfigsResponse)
    found: dict[str, int] = {}
    for result in response.results:
        if result.error_code:
            continue
        for config in result.configs:
            if config.name == "min.insync.replicas" and config.value and config.value.isdigit():
                found[result.resource_name] = int(config.value)
    return found


async def log_sizes(
    client: BrokerClient, brokers: Mapping[int, Address]
) -> dict[int, dict[str, int]]:
    """Bytes per topic on each broker that answers DescribeLogDirs (future replicas excluded)."""

    async def one(address: Address) -> dict[str, int]:
        response = await client.roundtrip(
            address, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse
        )
        if response.error_code:
            raise ProbeError(f"DescribeLogDirs: error code {int(response.error_code)}")
        sizes: dict[str, int] = {}
        for result in response.results:
            if result.error_code:
                continue
            for topic in result.topics:
                size = sum(int(p.partition_size) for p in topic.partitions if not p.is_future_key)
                sizes[str(topic.name)] = sizes.get(str(topic.name), 0) + size
        return sizes

    ids = sorted(brokers)
    answers = await asyncio.gather(*(one(brokers[i]) for i in ids), return_exceptions=True)
    out: dict[int, dict[str, int]] = {}
    for node, answer in zip(ids, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, (*BROKER_ERRORS, ProbeError)):
                raise answer
            continue
        out[node] = answer
    return out


async def groups_on(client: BrokerClient, address: Address) -> list[tuple[str, str]]:
    """``(group, type)`` of the groups the broker at ``address`` coordinates (any state)."""
    response = await client.roundtrip(address, ListGroupsRequest(), ListGroupsResponse)
    if response.error_code:
        raise ProbeError(f"ListGroups: error code {int(response.error_code)}")
    groups = []
    for group in response.groups:
        if group.protocol_type not in ("consumer", "") and group.group_type != "consumer":
            continue  # connect workers and the like have no offsets to lag on
        groups.append((str(group.group_id), group.group_type or "classic"))
    return groups


async def committed_offsets(
    client: BrokerClient, address: Address, groups: list[str]
) -> dict[str, dict[TopicPartition, int]]:
    """Committed offsets of ``groups`` from their coordinator at ``address``."""
    if not groups:
        return {}
    request = OffsetFetchRequest(
        groups=tuple(OffsetFetchRequestGroup(group_id=GroupId(g), topics=None) for g in groups),
        require_stable=False,
    )
    response = await client.roundtrip(address, request, OffsetFetchResponse)
    out: dict[str, dict[TopicPartition, int]] = {}
    for group in response.groups:
        if group.error_code:
            continue
        out[str(group.group_id)] = {
            (str(t.name), int(p.partition_index)): int(p.committed_offset)
            for t in group.topics
            for p in t.partitions
            if not p.error_code
        }
    return out


async def end_offsets(
    client: BrokerClient,
    brokers: Mapping[int, Address],
    leaders: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, int]:
    """The latest offset (high watermark) of each partition, asked of its leader."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in set(partitions):
        leader = leaders.get(tp, -1)
        if leader in brokers:
            by_leader.setdefault(leader, []).append(tp)

    async def one(node: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        request = ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=tuple(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(i), timestamp=i64(LATEST))
                        for i in sorted(indexes)
                    ),
                )
                for topic, indexes in sorted(topics.items())
            ),
        )
        response = await client.roundtrip(brokers[node], request, ListOffsetsResponse)
        return {
            (str(t.name), int(p.partition_index)): int(p.offset)
            for t in response.topics
            for p in t.partitions
            if not p.error_code
        }

    items = sorted(by_leader.items())
    answers = await asyncio.gather(*(one(n, tps) for n, tps in items), return_exceptions=True)
    out: dict[TopicPartition, int] = {}
    for answer in answers:
        if isinstance(answer, BaseException):
            if not isinstance(answer, BROKER_ERRORS):
                raise answer
            continue
        out.update(answer)
    return out
