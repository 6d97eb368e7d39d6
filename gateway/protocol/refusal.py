"""A request the gateway refuses without forwarding, answered as a broker would.

Kafka answers a request it refuses whole (unsupported version, no authorization)
with ``AbstractRequest.getErrorResponse``: the response of the request's own
version, with the error code at the top level where the schema has one and on
every entry the request named (topics, partitions, groups, resources…) where
the errors live per entry. ``refuse`` does the same from kio's schemas, driven
by ``ENTRIES``: one row per API key saying which request lists come back as
which response lists. An API whose row is empty answers at the top level only.
``tests/unit/protocol/test_refusal.py`` checks the table covers every API and
version kio knows.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from ..enforcement.mirror import list_item_type, mirror
from .codec import ProtocolError
from .errors import build_entity


@dataclass(frozen=True, slots=True)
class Entries:
    """Request list ``request`` comes back as response list ``response``.

    ``request`` may be a dotted path (``dirs.topics``: the topics of every dir).
    ``key``: the response field a bare string entry (a group id) goes into.
    ``rename``: request fields copied into differently named response fields.
    ``fill``: response fields with a fixed value (Kafka's -1 for "no node")."""

    request: str
    response: str
    key: str | None = None
    rename: tuple[tuple[str, str], ...] = ()
    fill: tuple[tuple[str, Any], ...] = ()


_E = Entries
TOPICS = (_E("topics", "topics"),)
RESULTS = (_E("topics", "results"),)
_GROUP_IDS = (_E("group_ids", "groups", key="group_id"),)
NO_NODE = (("node_id", -1), ("host", ""), ("port", -1))  # Kafka's "no coordinator"

ENTRIES: dict[int, tuple[Entries, ...]] = {
    0: (_E("topic_data", "responses"),),  # Produce
    1: (_E("topics", "responses"),),  # Fetch
    2: TOPICS,  # ListOffsets
    3: TOPICS,  # Metadata
    8: TOPICS,  # OffsetCommit
    9: (_E("topics", "topics"), _E("groups", "groups")),  # OffsetFetch (v8+: groups)
    10: (_E("coordinator_keys", "coordinators", key="key", fill=NO_NODE),),  # FindCoordinator
    11: (),  # JoinGroup
    12: (),  # Heartbeat
    13: (),  # LeaveGroup
    14: (),  # SyncGroup
    15: (_E("groups", "groups", key="group_id"),),  # DescribeGroups
    16: (),  # ListGroups
    17: (),  # SaslHandshake
    18: (),  # ApiVersions
    19: TOPICS,  # CreateTopics
    20: (_E("topic_names", "responses", key="name"), _E("topics", "responses")),  # DeleteTopics
    21: TOPICS,  # DeleteRecords
    22: (),  # InitProducerId
    23: TOPICS,  # OffsetForLeaderEpoch
    24: (  # AddPartitionsToTxn (v4+: per transaction, with a top-level error)
        _E("v3_and_below_topics", "results_by_topic_v3_and_below"),
        _E("transactions", "results_by_transaction"),
    ),
    25: (),  # AddOffsetsToTxn
    26: (),  # EndTxn
    27: (_E("markers", "markers"),),  # WriteTxnMarkers
    28: TOPICS,  # TxnOffsetCommit
    29: (),  # DescribeAcls
    30: (_E("creations", "results"),),  # CreateAcls
    31: (_E("filters", "filter_results"),),  # DeleteAcls
    32: (_E("resources", "results"),),  # DescribeConfigs
    33: (_E("resources", "responses"),),  # AlterConfigs
    34: (_E("dirs.topics", "results", rename=(("name", "topic_name"),)),),  # AlterReplicaLogDirs
    35: (),  # DescribeLogDirs (v1-2 have no error field: an empty answer, as Kafka's)
    36: (),  # SaslAuthenticate
    37: RESULTS,  # CreatePartitions
    38: (),  # CreateDelegationToken
    39: (),  # RenewDelegationToken
    40: (),  # ExpireDelegationToken
    41: (),  # DescribeDelegationToken
    42: (_E("groups_names", "results", key="group_id"),),  # DeleteGroups
    43: (_E("topic_partitions", "replica_election_results"),),  # ElectLeaders
    44: (_E("resources", "responses"),),  # IncrementalAlterConfigs
    45: (_E("topics", "responses"),),  # AlterPartitionReassignments
    46: (),  # ListPartitionReassignments
    47: (),  # OffsetDelete
    48: (),  # DescribeClientQuotas
    49: (_E("entries", "entries"),),  # AlterClientQuotas
    50: (),  # DescribeUserScramCredentials
    51: (  # AlterUserScramCredentials
        _E("deletions", "results", rename=(("name", "user"),)),
        _E("upsertions", "results", rename=(("name", "user"),)),
    ),
    52: (),  # Vote
    53: (),  # BeginQuorumEpoch
    54: (),  # EndQuorumEpoch
    55: (),  # DescribeQuorum
    56: (),  # AlterPartition
    57: (),  # UpdateFeatures
    58: (),  # Envelope
    59: (),  # FetchSnapshot
    60: (),  # DescribeCluster
    61: TOPICS,  # DescribeProducers
    62: (),  # BrokerRegistration
    63: (),  # BrokerHeartbeat
    64: (),  # UnregisterBroker
    65: (  # DescribeTransactions
        _E("transactional_ids", "transaction_states", key="transactional_id"),
    ),
    66: (),  # ListTransactions
    67: (),  # AllocateProducerIds
    68: (),  # ConsumerGroupHeartbeat
    69: _GROUP_IDS,  # ConsumerGroupDescribe
    70: (),  # ControllerRegistration
    71: (),  # GetTelemetrySubscriptions
    72: (),  # PushTelemetry
    73: (),  # AssignReplicasToDirs
    74: (),  # ListConfigResources
    75: TOPICS,  # DescribeTopicPartitions
    76: (),  # ShareGroupHeartbeat
    77: _GROUP_IDS,  # ShareGroupDescribe
    78: (),  # ShareFetch
    79: (),  # ShareAcknowledge
    80: (),  # AddRaftVoter
    81: (),  # RemoveRaftVoter
    82: (),  # UpdateRaftVoter
    83: RESULTS,  # InitializeShareGroupState
    84: RESULTS,  # ReadShareGroupState
    85: RESULTS,  # WriteShareGroupState
    86: RESULTS,  # DeleteShareGroupState
    87: RESULTS,  # ReadShareGroupStateSummary
    88: (),  # StreamsGroupHeartbeat
    89: _GROUP_IDS,  # StreamsGroupDescribe
    90: (_E("groups", "groups"),),  # DescribeShareGroupOffsets
    91: (),  # AlterShareGroupOffsets
    92: (),  # DeleteShareGroupOffsets
}


def refuse(
    request: Any, response_cls: type[Any], code: ErrorCode, message: str | None = None
) -> Any:
    """The response refusing all of ``request`` with ``code``, in ``response_cls``' version.

    ``message`` goes into every ``error_message`` at the top level and on the entries."""
    response = build_entity(response_cls, code)
    changes: dict[str, Any] = {}
    if message is not None and _has(response_cls, "error_message"):
        changes["error_message"] = message
    if request is not None:
        for row in ENTRIES[int(response_cls.__api_key__)]:
            if not _has(response_cls, row.response):
                continue
            entries = _entries(request, row.request)
            if entries is None:
                continue
            refused = tuple(_refused(response_cls, row, entry, code, message) for entry in entries)
            changes[row.response] = changes.get(row.response, ()) + refused
    return dataclasses.replace(response, **changes) if changes else response


def _has(cls: type[Any], name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _entries(request: Any, path: str) -> list[Any] | None:
    """The request's entries at ``path`` (None: the request has no such list)."""
    found: list[Any] = [request]
    for part in path.split("."):
        if not all(hasattr(item, part) for item in found):
            return None
        found = [entry for item in found for entry in (getattr(item, part) or ())]
    return found


def _refused(
    response_cls: type[Any], row: Entries, entry: Any, code: ErrorCode, message: str | None
) -> Any:
    item_cls = list_item_type(response_cls, row.response)
    if row.key is not None:
        source: Any = SimpleNamespace(**{row.key: entry})
    elif row.rename:
        renamed = {to: getattr(entry, name) for name, to in row.rename}
        source = SimpleNamespace(**_fields_of(entry), **renamed)
    else:
        source = entry
    refused = mirror(item_cls, source, code)
    changes = {name: value for name, value in row.fill if _has(item_cls, name)}
    if message is not None and _has(item_cls, "error_message"):
        changes["error_message"] = message
    return dataclasses.replace(refused, **changes) if changes else refused


def _fields_of(entry: Any) -> dict[str, Any]:
    """An entry's fields by name (a kio entity is slotted: no ``__dict__``)."""
    return {f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)}


def refuse_version(data: bytes, key: int, version: int, correlation_id: int) -> tuple[bytes, bool]:
    """The frame refusing request ``data`` with UNSUPPORTED_VERSION as a broker answers it,
    and whether the connection must close after it.

    In the client's own version, at the top level and on every entry the request named,
    where kio knows the schema; else header v0 and the error code, then a close. A
    Produce with acks=0 has no response to carry the error: ``ProtocolError``."""
    from .apis import PRODUCE, decodable_versions, response_schema
    from .codec import decode_request, encode_response, parse_request_head
    from .errors import UNSUPPORTED_VERSION
    from .framing import frame

    if version in decodable_versions(key):
        payload = memoryview(data)[4:]
        request: Any = decode_request(parse_request_head(payload), payload)
        if key == PRODUCE and int(request.acks) == 0:
            raise ProtocolError(f"Produce v{version} with acks=0 is not supported")
        body = refuse(request, response_schema(key, version), UNSUPPORTED_VERSION)
        return encode_response(key, version, correlation_id, body), False
    return frame(struct.pack(">ih", correlation_id, int(UNSUPPORTED_VERSION))), True
