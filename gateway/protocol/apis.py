"""Which Kafka APIs the gateway speaks, at which versions, with which headers.

The version ranges come from kio (generated from Kafka's own JSON schemas):
the gateway never advertises a version it cannot decode. ``CLIENT_APIS`` is the
allow-list of APIs a tenant may use; inter-broker, controller and Raft APIs,
delegation tokens, broker SCRAM administration and client telemetry are never
advertised (see docs/decisions/0003-advertised-apis.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
PRODUCE = 0
FETCH = 1
METADATA = 3
FIND_COORDINATOR = 10
DESCRIBE_CLUSTER = 60
SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79

CLIENT_APIS: frozenset[int] = frozenset(
    {
        0,  # Produce
        1,  # Fetch
        2,  # ListOffsets
        3,  # Metadata
        8,  # OffsetCommit
        9,  # OffsetFetch
        10,  # FindCoordinator
        11,  # JoinGroup
        12,  # Heartbeat
        13,  # LeaveGroup
        14,  # SyncGroup
        15,  # DescribeGroups
        16,  # ListGroups
        18,  # ApiVersions
        19,  # CreateTopics
        20,  # DeleteTopics
        21,  # DeleteRecords
        22,  # InitProducerId
        23,  # OffsetForLeaderEpoch
        24,  # AddPartitionsToTxn
        25,  # AddOffsetsToTxn
        26,  # EndTxn
        28,  # TxnOffsetCommit
        29,  # DescribeAcls
        30,  # CreateAcls
        31,  # DeleteAcls
        32,  # DescribeConfigs
        33,  # AlterConfigs
        35,  # DescribeLogDirs
        37,  # CreatePartitions
        42,  # DeleteGroups
        43,  # ElectLeaders
        44,  # IncrementalAlterConfigs
        45,  # AlterPartitionReassignments
        46,  # ListPartitionReassignments
        47,  # OffsetDelete
        48,  # DescribeClientQuotas
        49,  # AlterClientQuotas
        60,  # DescribeCluster
        61,  # DescribeProducers
        65,  # DescribeTransactions
        66,  # ListTransactions
        68,  # ConsumerGroupHeartbeat
        69,  # ConsumerGroupDescribe
        75,  # DescribeTopicPartitions
        76,  # ShareGroupHeartbeat
        77,  # ShareGroupDescribe
        78,  # ShareFetch
        79,  # ShareAcknowledge
        90,  # DescribeShareGroupOffsets
        91,  # AlterShareGroupOffsets
        92,  # DeleteShareGroupOffsets
    }
)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API as the gateway can decode it."""

    key: int
    name: str
    min_version: int
    max_version: int


def api_name(key: int) -> str:
    """The API's kio name (``"produce"``), or ``"unknown_<key>"``."""
    return api_key_map.get(key, f"unknown_{key}")


@cache
def decodable_versions(key: int) -> frozenset[int]:
    """Versions of ``key`` for which kio has both request and response schemas."""
    name = api_key_map.get(key)
    if name is None:
        return frozenset()
    versions = schema_name_map[name]
    return frozenset(
        v
        for v, entities in versions.items()
        if EntityType.request in entities and EntityType.response in entities
    )


def _contiguous_range(versions: frozenset[int]) -> tuple[int, int] | None:
    if not versions:
        return None
    low = min(versions)
    high = low
    while high + 1 in versions:
        high += 1
    return low, high


@cache
def gateway_apis() -> dict[int, ApiSpec]:
    """The APIs the gateway can decode, keyed by API key (client APIs only)."""
    specs: dict[int, ApiSpec] = {}
    for key in sorted(CLIENT_APIS):
        span = _contiguous_range(decodable_versions(key))
        if span is not None:
            specs[key] = ApiSpec(key, api_name(key), span[0], span[1])
    return specs


def is_supported(key: int, version: int) -> bool:
    spec = gateway_apis().get(key)
    return spec is not None and spec.min_version <= version <= spec.max_version


@cache
def request_schema(key: int, version: int) -> type[RequestPayload]:
    return load_request_schema(key, version)


@cache
def response_schema(key: int, version: int) -> type[ResponsePayload]:
    return load_response_schema(key, version)


@cache
def request_header_version(key: int, version: int) -> int:
    """2 for flexible request versions, 1 otherwise."""
    return 2 if request_schema(key, version).__flexible__ else 1


@cache
def response_header_version(key: int, version: int) -> int:
    """1 for flexible responses, 0 otherwise; ApiVersions always uses 0."""
    if key == API_VERSIONS:
        return 0
    return 1 if response_schema(key, version).__flexible__ else 0
