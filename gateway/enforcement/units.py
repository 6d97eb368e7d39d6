"""One enforcement unit per Kafka API: the checks Apache Kafka's authorizer makes.

A unit takes the decoded request, a ``check`` bound to the connection's
principal and address, and the response schema of the request's version, and
returns a ``Verdict``. The table ``UNITS`` is the whole mapping: an advertised
API without a unit is refused (tests/unit/enforcement checks none is missing).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from .. import saferegex
from ..authz.model import Operation as Op
from ..authz.model import ResourceType as R
from .answers import describable, guarded, members_guard, metadata_guard, partitions_guard
from .mirror import list_item_type, mirror
from .toolkit import (
    CLUSTER_DENIED,
    CLUSTER_NAME,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    deny_whole,
    item_name,
    named,
    respond_only,
    split,
)
from .verdict import PASS, Check, Verdict

Unit = Callable[[Any, Check, type[Any]], Verdict]


def _cluster(op: Op) -> Unit:
    def unit(request: Any, check: Check, rc: type[Any]) -> Verdict:
        allowed = check(R.CLUSTER, CLUSTER_NAME, op)
        return PASS if allowed else deny_whole(rc, CLUSTER_DENIED, request)

    return unit


def _group(op: Op, field: str = "group_id") -> Unit:
    def unit(request: Any, check: Check, rc: type[Any]) -> Verdict:
        allowed = check(R.GROUP, getattr(request, field), op)
        return PASS if allowed else deny_whole(rc, GROUP_DENIED, request)

    return unit


def _topics(field: str, op: Op, response_field: str) -> Unit:
    def unit(request: Any, check: Check, rc: type[Any]) -> Verdict:
        return split(
            request, rc, field, response_field,
            lambda t: item_name(t) is not None and check(R.TOPIC, item_name(t) or "", op),
            TOPIC_DENIED,
        )  # fmt: skip

    return unit


def is_replica(request: Any) -> bool:
    """A follower's fetch (or leader-epoch query): brokers only."""
    replica = getattr(request, "replica_id", None)
    if replica is None and getattr(request, "replica_state", None) is not None:
        replica = request.replica_state.replica_id
    return replica is not None and int(replica) >= 0


def produce(request: Any, check: Check, rc: type[Any]) -> Verdict:
    txn = request.transactional_id
    if txn is not None and not check(R.TRANSACTIONAL_ID, txn, Op.WRITE):
        return split(request, rc, "topic_data", "responses", lambda _t: False, TXN_DENIED)
    # ``_topics``' checks made here first, in order: Produce is nearly always all allowed
    topics = request.topic_data or ()
    answers = [(n := item_name(t)) is not None and check(R.TOPIC, n, Op.WRITE) for t in topics]
    if all(answers):
        return PASS
    given = iter(answers)  # ``split`` meets the topics in the same order
    return split(request, rc, "topic_data", "responses", lambda _t: next(given), TOPIC_DENIED)


def fetch(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if is_replica(request):  # a follower's fetch: never a tenant's business
        return deny_whole(rc, CLUSTER_DENIED, request)
    return _topics("topics", Op.READ, "responses")(request, check, rc)


def offset_for_leader_epoch(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if is_replica(request):
        return deny_whole(rc, CLUSTER_DENIED, request)
    return _topics("topics", Op.DESCRIBE, "topics")(request, check, rc)


def metadata(request: Any, check: Check, rc: type[Any]) -> Verdict:
    topics = request.topics
    visible = describable(check)
    if topics is None or (not topics and int(request.__version__) == 0):
        # all topics (an empty list means "all" in v0): leave out what may not be described
        return _metadata_filter(visible)
    return guarded(_metadata_named(request, check, rc, visible), metadata_guard(visible))


def _metadata_named(
    request: Any, check: Check, rc: type[Any], visible: Callable[[Any], bool]
) -> Verdict:
    topics = request.topics

    def asked(t: Any) -> bool:  # by name: checked now; by id: checked on the answer
        return visible(t) if t.name is not None else getattr(t, "topic_id", None) is not None

    verdict = split(request, rc, "topics", "topics", asked, TOPIC_DENIED)
    if verdict.local is not None and topics:
        return _metadata_none_visible(request, verdict.local.topics)
    creating = getattr(request, "allow_auto_topic_creation", False)
    if creating and not all(
        check(R.CLUSTER, CLUSTER_NAME, Op.CREATE) or check(R.TOPIC, t.name or "", Op.CREATE)
        for t in topics
    ):  # auto-creation needs CREATE
        if verdict.local is not None:
            return verdict
        base: Any = verdict.forward if verdict.rewritten else request
        return dataclasses.replace(
            verdict,
            forward=dataclasses.replace(base, allow_auto_topic_creation=False),
            rewritten=True,
        )
    return verdict


def _metadata_none_visible(request: Any, denied: tuple[Any, ...]) -> Verdict:
    """Every named topic denied: still ask for the brokers and the cluster (clients need
    them to go on), naming no topic, and answer the topics with 29. An empty list means
    "no topics" from v1; v0 reads it as "all", so whatever comes back is dropped."""

    def merge(response: Any) -> Any:
        return dataclasses.replace(response, topics=denied)

    changes: dict[str, Any] = {"topics": ()}
    if hasattr(request, "allow_auto_topic_creation"):  # v4 and later
        changes["allow_auto_topic_creation"] = False
    forward = dataclasses.replace(request, **changes)
    return Verdict(forward=forward, rewritten=True, merge=merge, denied=len(denied))


def _metadata_filter(visible: Callable[[Any], bool]) -> Verdict:
    """Forward as is; leave out of the answer every topic that may not be described."""

    def merge(response: Any) -> Any:
        return dataclasses.replace(response, topics=tuple(t for t in response.topics if visible(t)))

    return Verdict(forward=True, merge=merge)


def create_topics(request: Any, check: Check, rc: type[Any]) -> Verdict:
    cluster_ok = check(R.CLUSTER, CLUSTER_NAME, Op.CREATE)
    return split(
        request, rc, "topics", "topics",
        lambda t: cluster_ok or check(R.TOPIC, t.name, Op.CREATE), TOPIC_DENIED,
    )  # fmt: skip


ZERO_UUID = uuid.UUID(int=0)


def names_an_id(entry: Any) -> bool:
    """The entry carries a topic id, which the broker would act on instead of its name."""
    return getattr(entry, "topic_id", None) not in (None, ZERO_UUID)


def delete_topics(request: Any, check: Check, rc: type[Any]) -> Verdict:
    def allowed(t: Any) -> bool:  # by id (v6): the broker would delete whatever it names
        return t.name is not None and not names_an_id(t) and check(R.TOPIC, t.name, Op.DELETE)

    if hasattr(request, "topic_names"):
        entries = [named(name=n) for n in request.topic_names]
        return split(request, rc, "topic_names", "responses", allowed, TOPIC_DENIED, entries)
    return split(request, rc, "topics", "responses", allowed, TOPIC_DENIED)


def offset_commit(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if not check(R.GROUP, request.group_id, Op.READ):
        return split(request, rc, "topics", "topics", lambda _t: False, GROUP_DENIED)
    return _topics("topics", Op.READ, "topics")(request, check, rc)


def txn_offset_commit(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if not check(R.TRANSACTIONAL_ID, request.transactional_id, Op.WRITE):
        return split(request, rc, "topics", "topics", lambda _t: False, TXN_DENIED)
    return offset_commit(request, check, rc)


def offset_delete(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if not check(R.GROUP, request.group_id, Op.DELETE):
        return deny_whole(rc, GROUP_DENIED, request)
    return _topics("topics", Op.READ, "topics")(request, check, rc)


def offset_fetch(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if hasattr(request, "groups"):
        return _offset_fetch_groups(request, check, rc)
    if not check(R.GROUP, request.group_id, Op.DESCRIBE):  # per partition, and top level v2+
        return deny_whole(rc, GROUP_DENIED, request)
    if request.topics is None:  # all committed topics: leave out the undescribable
        return _offsets_visible(check)
    return _topics("topics", Op.DESCRIBE, "topics")(request, check, rc)


def _offsets_visible(check: Check) -> Verdict:
    def visible(topics: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t for t in topics if check(R.TOPIC, t.name, Op.DESCRIBE))

    def merge(response: Any) -> Any:
        if hasattr(response, "groups"):
            groups = tuple(
                dataclasses.replace(g, topics=visible(g.topics)) for g in response.groups
            )
            return dataclasses.replace(response, groups=groups)
        return dataclasses.replace(response, topics=visible(response.topics))

    return Verdict(forward=True, merge=merge)


def _offset_fetch_groups(request: Any, check: Check, rc: type[Any]) -> Verdict:
    """v8+: several groups, each with named topics or all of them."""
    group_cls = list_item_type(rc, "groups")
    topic_cls = list_item_type(group_cls, "topics")
    forwarded, refused_groups = [], []
    refused_topics: dict[str, tuple[Any, ...]] = {}
    for group in request.groups:
        if not check(R.GROUP, group.group_id, Op.DESCRIBE):
            refused_groups.append(mirror(group_cls, group, GROUP_DENIED))
            continue
        if group.topics is not None:
            ok = tuple(t for t in group.topics if check(R.TOPIC, t.name, Op.DESCRIBE))
            bad = [t for t in group.topics if t not in ok]
            if bad:
                refused_topics[group.group_id] = tuple(
                    mirror(topic_cls, t, TOPIC_DENIED) for t in bad
                )
                group = dataclasses.replace(group, topics=ok)
        forwarded.append(group)
    denied = len(refused_groups) + sum(len(t) for t in refused_topics.values())
    if not forwarded:
        return Verdict(local=respond_only(rc, "groups", refused_groups), denied=denied)

    def merge(response: Any) -> Any:
        groups = []
        for group in response.groups:
            topics = tuple(t for t in group.topics if check(R.TOPIC, t.name, Op.DESCRIBE))
            topics += refused_topics.get(group.group_id, ())
            groups.append(dataclasses.replace(group, topics=topics))
        return dataclasses.replace(response, groups=tuple(groups) + tuple(refused_groups))

    if not denied:
        return Verdict(forward=True, merge=merge)
    forward = dataclasses.replace(request, groups=tuple(forwarded))
    return Verdict(forward=forward, rewritten=True, merge=merge, denied=denied)


def find_coordinator(request: Any, check: Check, rc: type[Any]) -> Verdict:
    transactional = int(getattr(request, "key_type", 0)) == 1  # v0 knows only groups

    def allowed(key: Any) -> bool:
        if transactional:
            return check(R.TRANSACTIONAL_ID, key.key, Op.DESCRIBE)
        return check(R.GROUP, key.key, Op.DESCRIBE)

    code = TXN_DENIED if transactional else GROUP_DENIED
    if hasattr(request, "coordinator_keys"):
        entries = [named(key=k, node_id=-1, host="", port=-1) for k in request.coordinator_keys]
        return split(request, rc, "coordinator_keys", "coordinators", allowed, code, entries)
    return PASS if allowed(named(key=request.key)) else deny_whole(rc, code, request)


def _named_list(
    request_field: str, response_field: str, key: str, resource: R, op: Op, code: ErrorCode
) -> Unit:
    def unit(request: Any, check: Check, rc: type[Any]) -> Verdict:
        entries = [named(**{key: v}) for v in getattr(request, request_field)]
        return split(
            request, rc, request_field, response_field,
            lambda e: check(resource, getattr(e, key), op), code, entries,
        )  # fmt: skip

    return unit


def _config_resource(op: Op) -> Callable[[Any, Check], tuple[bool, ErrorCode]]:
    def decide(resource: Any, check: Check) -> tuple[bool, ErrorCode]:
        kind = int(resource.resource_type)
        if kind == 2:  # TOPIC
            return check(R.TOPIC, resource.resource_name, op), TOPIC_DENIED
        if kind == 32:  # GROUP
            return check(R.GROUP, resource.resource_name, op), GROUP_DENIED
        return check(R.CLUSTER, CLUSTER_NAME, op), CLUSTER_DENIED  # broker, logger, metrics

    return decide


def _configs(op: Op, response_field: str) -> Unit:
    decide = _config_resource(op)

    def unit(request: Any, check: Check, rc: type[Any]) -> Verdict:
        return split(
            request, rc, "resources", response_field,
            lambda r: decide(r, check)[0], lambda r: decide(r, check)[1],
        )  # fmt: skip

    return unit


def elect_leaders(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if check(R.CLUSTER, CLUSTER_NAME, Op.ALTER):
        return PASS
    return deny_whole(rc, CLUSTER_DENIED, request)  # per partition, and top level v1+


def alter_client_quotas(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if check(R.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS):
        return PASS
    return split(request, rc, "entries", "entries", lambda _e: False, CLUSTER_DENIED)


def add_partitions_to_txn(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if hasattr(request, "transactions"):  # v4+: sent by brokers only
        return deny_whole(rc, CLUSTER_DENIED, request)
    txn = request.v3_and_below_transactional_id
    field, response_field = "v3_and_below_topics", "results_by_topic_v3_and_below"
    if not check(R.TRANSACTIONAL_ID, txn, Op.WRITE):
        return split(request, rc, field, response_field, lambda _t: False, TXN_DENIED)
    return _topics(field, Op.WRITE, response_field)(request, check, rc)


def add_offsets_to_txn(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if not check(R.TRANSACTIONAL_ID, request.transactional_id, Op.WRITE):
        return deny_whole(rc, TXN_DENIED, request)
    return _group(Op.READ)(request, check, rc)


def init_producer_id(request: Any, check: Check, rc: type[Any]) -> Verdict:
    txn = request.transactional_id
    if txn is None:  # idempotence alone: every Produce is still checked per topic
        return PASS
    return PASS if check(R.TRANSACTIONAL_ID, txn, Op.WRITE) else deny_whole(rc, TXN_DENIED, request)


def end_txn(request: Any, check: Check, rc: type[Any]) -> Verdict:
    ok = check(R.TRANSACTIONAL_ID, request.transactional_id, Op.WRITE)
    return PASS if ok else deny_whole(rc, TXN_DENIED, request)


def list_groups(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if check(R.CLUSTER, CLUSTER_NAME, Op.DESCRIBE):
        return PASS

    def merge(response: Any) -> Any:
        kept = tuple(g for g in response.groups if check(R.GROUP, g.group_id, Op.DESCRIBE))
        return dataclasses.replace(response, groups=kept)

    return Verdict(forward=True, merge=merge)


def list_transactions(request: Any, check: Check, rc: type[Any]) -> Verdict:
    def merge(response: Any) -> Any:
        kept = tuple(
            t for t in response.transaction_states
            if check(R.TRANSACTIONAL_ID, t.transactional_id, Op.DESCRIBE)
        )  # fmt: skip
        return dataclasses.replace(response, transaction_states=kept)

    return Verdict(forward=True, merge=merge)


# The name a regex subscription is authorized as: its literal prefix followed by text no
# topic name and no LITERAL rule of a topic can hold, so only a grant covering every name
# with that prefix (PREFIXED, or the wildcard) allows it, and a DENY of the prefix denies it.
REGEX_STANDIN = "<regex>"
REGEX_NOT_GRANTED = (
    "a regex subscription is authorized on the text every match starts with ({prefix!r}): "
    "READ on all topics with that prefix is needed; start the pattern with your prefix"
)


def _regex_refusal(pattern: str, check: Check) -> tuple[ErrorCode, str] | None:
    """Why a KIP-848 regex may not be subscribed to, or ``None``. The brokers resolve it
    (RE2J), so it must lie in the syntax both read alike (``saferegex``), and the principal
    must be allowed every topic it could match: all names with its literal prefix."""
    try:
        prefix = saferegex.literal_prefix(pattern)
    except saferegex.RegexRefused as exc:
        return ErrorCode.invalid_regular_expression, f"regular expression refused: {exc}"
    standin = prefix + REGEX_STANDIN
    if check(R.TOPIC, standin, Op.DESCRIBE) and check(R.TOPIC, standin, Op.READ):
        return None
    return ErrorCode.topic_authorization_failed, REGEX_NOT_GRANTED.format(prefix=prefix)


def consumer_group_heartbeat(request: Any, check: Check, rc: type[Any]) -> Verdict:
    if not check(R.GROUP, request.group_id, Op.READ):
        return deny_whole(rc, GROUP_DENIED, request)
    pattern = getattr(request, "subscribed_topic_regex", None)
    if pattern:  # resolved by the broker: authorized on what it can match
        refused = _regex_refusal(pattern, check)
        if refused is not None:
            return deny_whole(rc, refused[0], request, refused[1])
    names = request.subscribed_topic_names or ()
    if not all(check(R.TOPIC, name, Op.DESCRIBE) for name in names):
        return deny_whole(rc, TOPIC_DENIED, request)
    return PASS


def consumer_group_describe(request: Any, check: Check, rc: type[Any]) -> Verdict:
    """Groups by DESCRIBE; in what the broker answers, members' subscriptions and
    assignments keep only the topics the principal may describe."""
    verdict = _named_list("group_ids", "groups", "group_id", R.GROUP, Op.DESCRIBE, GROUP_DENIED)(
        request, check, rc
    )
    return guarded(verdict, members_guard(check))


def describe_topic_partitions(request: Any, check: Check, rc: type[Any]) -> Verdict:
    """Named topics by DESCRIBE; an empty list means "all": the broker's answer keeps
    only describable topics, and a cursor naming another topic is dropped. The
    request's own cursor must name a describable topic, or the request is refused
    whole: the broker fills its partition limit from the cursor on, so a cursor
    chosen freely would tell, by how many partitions come back, which names and
    partitions lie past it (the gateway's own cursors always pass)."""
    cursor = request.cursor
    if cursor is not None and not check(R.TOPIC, cursor.topic_name, Op.DESCRIBE):
        return deny_whole(rc, TOPIC_DENIED, request)
    verdict = _topics("topics", Op.DESCRIBE, "topics")(request, check, rc)
    return guarded(verdict, partitions_guard(describable(check)))


def describe_transactions(request: Any, check: Check, rc: type[Any]) -> Verdict:
    """DESCRIBE on every transactional id. A request naming any id that may not be
    described is refused whole (53 on every id): the broker's answer for a transaction
    never started carries a start time of -1, which kio cannot decode, so a partial
    answer could not be merged. Clients describe their own ids and are unaffected."""
    ids = request.transactional_ids
    if all(check(R.TRANSACTIONAL_ID, t, Op.DESCRIBE) for t in ids):
        return PASS
    item_cls = list_item_type(rc, "transaction_states")
    refused = [mirror(item_cls, named(transactional_id=t), TXN_DENIED) for t in ids]
    return Verdict(local=respond_only(rc, "transaction_states", refused), denied=len(ids))


def passthrough(request: Any, check: Check, rc: type[Any]) -> Verdict:
    return PASS


UNITS: dict[int, Unit] = {
    0: produce,
    1: fetch,
    2: _topics("topics", Op.DESCRIBE, "topics"),  # ListOffsets
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: _group(Op.READ),  # JoinGroup
    12: _group(Op.READ),  # Heartbeat
    13: _group(Op.READ),  # LeaveGroup
    14: _group(Op.READ),  # SyncGroup
    15: _named_list("groups", "groups", "group_id", R.GROUP, Op.DESCRIBE, GROUP_DENIED),
    16: list_groups,
    18: passthrough,  # ApiVersions
    19: create_topics,
    20: delete_topics,
    21: _topics("topics", Op.DELETE, "topics"),  # DeleteRecords
    22: init_producer_id,
    23: offset_for_leader_epoch,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
    28: txn_offset_commit,
    32: _configs(Op.DESCRIBE_CONFIGS, "results"),
    33: _configs(Op.ALTER_CONFIGS, "responses"),
    35: _cluster(Op.DESCRIBE),  # DescribeLogDirs
    37: _topics("topics", Op.ALTER, "results"),  # CreatePartitions
    42: _named_list("groups_names", "results", "group_id", R.GROUP, Op.DELETE, GROUP_DENIED),
    43: elect_leaders,
    44: _configs(Op.ALTER_CONFIGS, "responses"),  # IncrementalAlterConfigs
    45: _cluster(Op.ALTER),  # AlterPartitionReassignments
    46: _cluster(Op.DESCRIBE),  # ListPartitionReassignments
    47: offset_delete,
    48: _cluster(Op.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: alter_client_quotas,
    60: passthrough,  # DescribeCluster: Kafka authorizes only the authorized-operations field
    61: _topics("topics", Op.READ, "topics"),  # DescribeProducers
    65: describe_transactions,
    66: list_transactions,
    68: consumer_group_heartbeat,
    69: consumer_group_describe,
    75: describe_topic_partitions,
}

# Versions beyond these name topics only by id, which the gateway cannot authorize
# by name; with authorization on they are not advertised (docs/decisions/0008).
AUTHZ_MAX_VERSION: dict[int, int] = {0: 12, 1: 12, 8: 9, 9: 9}
# Not advertised with authorization on: share groups (they name topics by id only).
AUTHZ_HIDDEN: frozenset[int] = frozenset({76, 77, 78, 79, 90, 91, 92})
