"""What each advertised request names that a broker acts on, and how the gateway
authorizes it: the written-down answer to "authorize the effective resource set".

``RESOURCE_FIELDS[api_key]`` maps every resource-bearing field path of the API's
requests (``topics[].name``; ``?`` marks a nullable list whose null means "all";
``[]`` a list of bare strings) to how it is handled. ``resource_paths`` finds those
paths in kio's schemas; tests/unit/enforcement/test_resources.py fails when an
advertised API version carries a path this table does not name, so a new Kafka
version with a topic id, session, regex or "all" form cannot slip through unread.

The handling words: ``checked`` (authorized before forwarding, per entry where the
API has entries), ``answer`` (the broker resolves it; its answer is checked again
and what may not be seen is refused or left out), ``session`` (fetch sessions,
gateway/enforcement/fetch_sessions.py), ``refused`` (a form the gateway cannot
compute is refused), ``scoped`` (only meaningful inside a resource already
checked), ``licence`` (plan limits, gateway/quotas/licence_apis.py).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

_RESOURCE_NAME = re.compile(
    r"topic|group|transactional_id|session|regex|resource_name|^key$|coordinator_keys"
    r"|principal|^name$|cursor"
)

RESOURCE_FIELDS: dict[int, dict[str, str]] = {
    0: {  # Produce
        "transactional_id": "checked: TRANSACTIONAL_ID WRITE",
        "topic_data[].name": "checked: TOPIC WRITE (v13+ names topics by id: not advertised)",
    },
    1: {  # Fetch
        "topics[].topic": "session: TOPIC READ on the whole session, refused partitions 29",
        "session_id": "session: bound to the connection that created it",
        "session_epoch": "session: translated, advances as a broker's would",
        "forgotten_topics_data[].topic": "session: applied to the connection's own session",
    },
    2: {"topics[].name": "checked: TOPIC DESCRIBE"},  # ListOffsets
    3: {  # Metadata
        "topics[].name": "checked: TOPIC DESCRIBE; answer: each returned topic again",
        "topics?": "answer: null (and [] in v0) means all, undescribable topics left out",
        "topics[].topic_id": "answer: the broker resolves the id, the returned name is checked",
        "allow_auto_topic_creation": "checked: CLUSTER or TOPIC CREATE, else turned off",
        "include_topic_authorized_operations": "scoped: about the returned topics",
    },
    8: {  # OffsetCommit
        "group_id": "checked: GROUP READ",
        "topics[].name": "checked: TOPIC READ (v10+ by id: not advertised)",
        "group_instance_id": "scoped: within the checked group",
    },
    9: {  # OffsetFetch
        "group_id": "checked: GROUP DESCRIBE",
        "topics[].name": "checked: TOPIC DESCRIBE",
        "topics?": "answer: null means all committed topics, undescribable left out",
        "groups[].group_id": "checked: GROUP DESCRIBE per group",
        "groups[].topics?": "answer: null means all, undescribable left out per group",
        "groups[].topics[].name": "checked: TOPIC DESCRIBE",
    },
    10: {  # FindCoordinator
        "key": "checked: GROUP or TRANSACTIONAL_ID DESCRIBE by key type",
        "coordinator_keys[]": "checked: per key",
    },
    11: {  # JoinGroup
        "group_id": "checked: GROUP READ",
        "session_timeout": "scoped: a timeout, not a resource",
        "protocols[].name": "scoped: assignor protocol names within the group",
        "group_instance_id": "scoped: within the checked group",
    },
    12: {"group_id": "checked: GROUP READ", "group_instance_id": "scoped"},  # Heartbeat
    13: {"group_id": "checked: GROUP READ", "members[].group_instance_id": "scoped"},
    14: {"group_id": "checked: GROUP READ", "group_instance_id": "scoped"},  # SyncGroup
    15: {"groups[]": "checked: GROUP DESCRIBE per group"},  # DescribeGroups
    19: {  # CreateTopics
        "topics[].name": "checked: CLUSTER or TOPIC CREATE; licence",
        "topics[].configs[].name": "licence: parsed as the broker parses it",
    },
    20: {  # DeleteTopics
        "topic_names[]": "checked: TOPIC DELETE",
        "topics[].name": "checked: TOPIC DELETE",
        "topics[].topic_id": "refused: an entry naming a topic id (the broker would act on it)",
    },
    21: {"topics[].name": "checked: TOPIC DELETE"},  # DeleteRecords
    22: {"transactional_id": "checked: TRANSACTIONAL_ID WRITE (null: Produce checks)"},
    23: {"topics[].topic": "checked: TOPIC DESCRIBE; replica requests refused"},
    24: {  # AddPartitionsToTxn
        "v3_and_below_transactional_id": "checked: TRANSACTIONAL_ID WRITE",
        "v3_and_below_topics[].name": "checked: TOPIC WRITE",
        "transactions[].transactional_id": "refused: v4+ is sent by brokers only",
        "transactions[].topics[].name": "refused: v4+ is sent by brokers only",
    },
    25: {"transactional_id": "checked: WRITE", "group_id": "checked: GROUP READ"},
    26: {"transactional_id": "checked: TRANSACTIONAL_ID WRITE"},  # EndTxn
    28: {  # TxnOffsetCommit
        "transactional_id": "checked: TRANSACTIONAL_ID WRITE",
        "group_id": "checked: GROUP READ",
        "topics[].name": "checked: TOPIC READ",
        "group_instance_id": "scoped: within the checked group",
    },
    29: {  # DescribeAcls: answered from the gateway's own policy store
        "resource_name_filter": "answer: only rules the principal may describe",
        "principal_filter": "answer: only rules the principal may describe",
    },
    30: {
        "creations[].resource_name": "checked: CLUSTER ALTER",
        "creations[].principal": "checked",
    },
    31: {
        "filters[].resource_name_filter": "checked: CLUSTER ALTER",
        "filters[].principal_filter": "checked",
    },
    32: {"resources[].resource_name": "checked: DESCRIBE_CONFIGS by resource type"},
    33: {
        "resources[].resource_name": "checked: ALTER_CONFIGS by resource type",
        "resources[].configs[].name": "licence: parsed as the broker parses it",
    },
    35: {"topics?": "checked: CLUSTER DESCRIBE", "topics[].topic": "checked: CLUSTER DESCRIBE"},
    37: {"topics[].name": "checked: TOPIC ALTER; licence"},  # CreatePartitions
    42: {"groups_names[]": "checked: GROUP DELETE"},  # DeleteGroups
    43: {  # ElectLeaders
        "topic_partitions?": "checked: CLUSTER ALTER (null: all)",
        "topic_partitions[].topic": "checked: CLUSTER ALTER",
    },
    44: {
        "resources[].resource_name": "checked: ALTER_CONFIGS by resource type",
        "resources[].configs[].name": "licence: parsed as the broker parses it",
    },
    45: {"topics[].name": "checked: CLUSTER ALTER"},  # AlterPartitionReassignments
    46: {"topics?": "checked: CLUSTER DESCRIBE", "topics[].name": "checked: CLUSTER DESCRIBE"},
    47: {"group_id": "checked: GROUP DELETE", "topics[].name": "checked: TOPIC READ"},
    49: {"entries[].ops[].key": "checked: CLUSTER ALTER_CONFIGS (quota keys)"},
    61: {"topics[].name": "checked: TOPIC READ"},  # DescribeProducers
    65: {"transactional_ids[]": "checked: DESCRIBE on all, else all refused"},
    66: {"transactional_id_pattern": "answer: only describable transactional ids kept"},
    68: {  # ConsumerGroupHeartbeat
        "group_id": "checked: GROUP READ",
        "subscribed_topic_names?[]": "checked: TOPIC DESCRIBE on every name",
        "subscribed_topic_regex": "checked: TOPIC DESCRIBE+READ on every name with the "
        "pattern's literal prefix (saferegex syntax only); the brokers filter by DESCRIBE",
        "topic_partitions?": "scoped: the member's owned partitions, compared by the "
        "coordinator with its own assignment; grants nothing",
        "topic_partitions[].topic_id": "scoped: as topic_partitions",
    },
    69: {"group_ids[]": "checked: GROUP DESCRIBE; answer: members' topics filtered"},
    75: {  # DescribeTopicPartitions
        "topics[].name": "checked: TOPIC DESCRIBE; answer: [] means all, filtered",
        "cursor.topic_name": "checked: TOPIC DESCRIBE (a start position); the returned "
        "cursor is checked",
    },
}


def resource_paths(cls: type[Any], prefix: str = "") -> Iterator[str]:
    """Every resource-bearing field path of a kio request class (see the module doc)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint, nullable = _unwrap(hints[field.name])
        path = prefix + field.name
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple:
            item = args[0]
            if isinstance(item, type) and dataclasses.is_dataclass(item):
                if nullable and _RESOURCE_NAME.search(field.name):
                    yield path + "?"
                yield from resource_paths(item, path + "[].")
            elif _RESOURCE_NAME.search(field.name):
                yield path + ("?" if nullable else "") + "[]"
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from resource_paths(hint, path + ".")
        elif _RESOURCE_NAME.search(field.name):
            yield path


def _unwrap(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner[0], True
    return hint, False
