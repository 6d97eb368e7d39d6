"""Which fields of which API carry a tenant's names: the table the mappers follow. Pure.

``NAMED_APIS[key]`` lists, per API key, the request paths mapped tenant → cluster, the
response paths mapped cluster → tenant (a foreign name's entry left out), the highest
version the namespace filter maps (above it the API names topics by id only and is
not offered to a namespaced tenant), and the fields that look like names but are not a
tenant's resources (``not_names``: assignor protocols, instance ids, config names…).
tests/unit/namespaces/test_completeness.py walks kio's schemas: a name-bearing field of
an offered version that is neither mapped nor listed as ``not_names`` fails it, so a
new Kafka version with a name field cannot slip through unmapped.

APIs carrying no tenant name at all are in ``NAMELESS``. An API in neither is not
offered to a namespaced tenant (``advertised``): fail closed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NamedApi:
    request: tuple[str, ...]
    response: tuple[str, ...]
    max_version: int | None = None  # None: every version the gateway decodes
    not_names: tuple[str, ...] = ()
    special: tuple[str, ...] = ()  # paths ``mappers`` handles itself (``note`` says how)
    note: str | None = None


_INSTANCE = ("group_instance_id",)  # a static member's id, scoped by its group
ACL_APIS = frozenset({29, 30, 31})  # offered only where the gateway answers them itself
ACL_NOTE = (
    "answered by the gateway (enforcement/acl_admin.py, scope): only rules inside the "
    "namespace, shown without the prefix; a null name filter selects inside it only"
)

GROUP_BYTES_NOTE = (
    "a consumer group's subscriptions and assignments (the consumer protocol's bytes) "
    "mapped too: namespaces/groups.py"
)

NAMED_APIS: dict[int, NamedApi] = {
    0: NamedApi(("topic_data[].name", "transactional_id"), ("responses[].name",), 12),
    1: NamedApi(("topics[].topic", "forgotten_topics_data[].topic"), ("responses[].topic",), 12),
    2: NamedApi(("topics[].name",), ("topics[].name",)),  # ListOffsets
    3: NamedApi(  # Metadata: a topic asked for by id is answered with its name, checked
        ("topics[].name",),
        ("topics[].name",),
        not_names=(
            "allow_auto_topic_creation",
            "include_topic_authorized_operations",
            "topics[].topic_authorized_operations",
            "topics[].topic_id",
        ),
        note="a topic asked for by id is answered by name: another tenant's is left out",
    ),
    8: NamedApi(("group_id", "topics[].name"), ("topics[].name",), 9, _INSTANCE),
    9: NamedApi(  # OffsetFetch, v8+ several groups
        ("group_id", "topics[].name", "groups[].group_id", "groups[].topics[].name"),
        ("topics[].name", "groups[].group_id", "groups[].topics[].name"),
        9,
    ),
    10: NamedApi(("key", "coordinator_keys[]"), ("coordinators[].key",)),  # FindCoordinator
    11: NamedApi(  # JoinGroup
        ("group_id",),
        (),
        None,
        (*_INSTANCE, "members[].group_instance_id", "protocols[].name", "protocol_name"),
        note=GROUP_BYTES_NOTE,
    ),
    12: NamedApi(("group_id",), (), None, _INSTANCE),  # Heartbeat
    13: NamedApi(("group_id",), (), None, ("members[].group_instance_id",)),  # LeaveGroup
    14: NamedApi(("group_id",), (), None, (*_INSTANCE, "protocol_name"), note=GROUP_BYTES_NOTE),
    15: NamedApi(  # DescribeGroups
        ("groups[]",),
        ("groups[].group_id",),
        None,
        ("groups[].group_state", "groups[].members[].group_instance_id"),
        note=GROUP_BYTES_NOTE,
    ),
    16: NamedApi(  # ListGroups: only the tenant's groups
        (), ("groups[].group_id",), None, ("groups[].group_state", "groups[].group_type")
    ),
    19: NamedApi(  # CreateTopics
        ("topics[].name",),
        ("topics[].name",),
        None,
        ("topics[].configs[].name", "topics[].topic_config_error_code", "topics[].topic_id"),
        note="tenant-side topic names '', '.' and '..' refused as Kafka refuses them",
    ),
    20: NamedApi(  # DeleteTopics
        ("topic_names[]", "topics[].name"),
        ("responses[].name",),
        None,
        ("responses[].topic_id",),
        ("topics[].topic_id",),
        "an entry naming a topic id (and no name) refused: it could be anyone's",
    ),
    21: NamedApi(("topics[].name",), ("topics[].name",)),  # DeleteRecords
    22: NamedApi(("transactional_id",), ()),  # InitProducerId
    23: NamedApi(("topics[].topic",), ("topics[].topic",)),  # OffsetForLeaderEpoch
    24: NamedApi(  # AddPartitionsToTxn, v4+ batched
        (
            "v3_and_below_transactional_id",
            "v3_and_below_topics[].name",
            "transactions[].transactional_id",
            "transactions[].topics[].name",
        ),
        (
            "results_by_topic_v3_and_below[].name",
            "results_by_transaction[].transactional_id",
            "results_by_transaction[].topic_results[].name",
        ),
    ),
    25: NamedApi(("transactional_id", "group_id"), ()),  # AddOffsetsToTxn
    26: NamedApi(("transactional_id",), ()),  # EndTxn
    28: NamedApi(  # TxnOffsetCommit
        ("transactional_id", "group_id", "topics[].name"), ("topics[].name",), None, _INSTANCE
    ),
    29: NamedApi(  # DescribeAcls: answered by the gateway, inside the namespace only
        ("resource_name_filter",),
        (),
        None,
        (),
        ("resources[].resource_name",),
        ACL_NOTE,
    ),
    30: NamedApi(("creations[].resource_name",), ()),  # CreateAcls (principals: not names)
    31: NamedApi(  # DeleteAcls
        ("filters[].resource_name_filter",),
        (),
        None,
        (),
        ("filter_results[].matching_acls[].resource_name",),
        ACL_NOTE,
    ),
    32: NamedApi(  # DescribeConfigs
        (),
        (),
        None,
        ("results[].configs[].name", "results[].configs[].synonyms[].name"),
        ("resources[].resource_name", "results[].resource_name"),
        "resource_name mapped for TOPIC and GROUP resources only, foreign ones left out",
    ),
    33: NamedApi(  # AlterConfigs
        (),
        (),
        None,
        ("resources[].configs[].name",),
        ("resources[].resource_name", "responses[].resource_name"),
        "as DescribeConfigs",
    ),
    37: NamedApi(("topics[].name",), ("results[].name",)),  # CreatePartitions
    42: NamedApi(("groups_names[]",), ("results[].group_id",)),  # DeleteGroups
    44: NamedApi(  # IncrementalAlterConfigs
        (),
        (),
        None,
        ("resources[].configs[].name",),
        ("resources[].resource_name", "responses[].resource_name"),
        "as DescribeConfigs",
    ),
    47: NamedApi(("group_id", "topics[].name"), ("topics[].name",)),  # OffsetDelete
    61: NamedApi(("topics[].name",), ("topics[].name",)),  # DescribeProducers
    65: NamedApi(  # DescribeTransactions
        ("transactional_ids[]",),
        ("transaction_states[].transactional_id", "transaction_states[].topics[].topic"),
    ),
    66: NamedApi(  # ListTransactions: only the tenant's ids
        (),
        ("transaction_states[].transactional_id",),
        None,
        (),
        ("transactional_id_pattern",),
        "transactional_id_pattern confined to the namespace (Namespace.regex_to_cluster)",
    ),
    68: NamedApi(  # ConsumerGroupHeartbeat (KIP-848)
        ("group_id", "subscribed_topic_names[]"),
        (),
        None,
        ("topic_partitions[].topic_id", "assignment.topic_partitions[].topic_id"),
        ("subscribed_topic_regex",),
        "subscribed_topic_regex confined to the namespace (Namespace.regex_to_cluster)",
    ),
    69: NamedApi(  # ConsumerGroupDescribe (KIP-848)
        ("group_ids[]",),
        (
            "groups[].group_id",
            "groups[].members[].subscribed_topic_names[]",
            "groups[].members[].assignment.topic_partitions[].topic_name",
            "groups[].members[].target_assignment.topic_partitions[].topic_name",
        ),
        None,
        (
            "groups[].assignor_name",
            "groups[].group_epoch",
            "groups[].group_state",
            "groups[].members[].assignment.topic_partitions[].topic_id",
            "groups[].members[].target_assignment.topic_partitions[].topic_id",
        ),
        ("groups[].members[].subscribed_topic_regex",),
        "members' regexes shown as the tenant wrote them",
    ),
    75: NamedApi(  # DescribeTopicPartitions: [] means all, answered with own topics only
        ("topics[].name", "cursor.topic_name"),
        ("topics[].name",),
        None,
        ("topics[].topic_authorized_operations", "topics[].topic_id"),
        ("next_cursor.topic_name",),
        "a next cursor on another tenant's topic ends the listing",
    ),
}

# API keys that carry none of a tenant's names: offered as they are.
NAMELESS: frozenset[int] = frozenset(
    {
        17,  # SaslHandshake
        18,  # ApiVersions
        36,  # SaslAuthenticate
        48,  # DescribeClientQuotas (the quota admin answers per tenant)
        49,  # AlterClientQuotas
        60,  # DescribeCluster
    }
)

# Configuration resources whose resource_name is a tenant's name (Kafka's ConfigResource.Type)
NAMED_CONFIG_RESOURCES: frozenset[int] = frozenset({2, 32})  # TOPIC, GROUP


def offered_max(key: int, gateway_max: int) -> int | None:
    """The highest version of ``key`` offered to a namespaced tenant (None: not offered)."""
    if key in NAMELESS:
        return gateway_max
    entry = NAMED_APIS.get(key)
    if entry is None:
        return None
    return gateway_max if entry.max_version is None else min(gateway_max, entry.max_version)
