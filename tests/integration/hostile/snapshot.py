"""The victim's state, read through super-user connections straight to the brokers.

Two snapshots are equal when the attacker read, changed, evicted and created
nothing of the victim's: topics (names, ids, partition counts, configs), records
(start and end offsets, a hash of every partition's content), groups (state,
members, assignments, committed offsets), the transactional id (state, producer
id and epoch), and the authorization policy and quota settings.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..rawkafka import RawConnection
from .kafkamsg import request
from .stack import Ctx, Stack

Snapshot = dict[str, Any]


class _Pool:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.open: dict[int, RawConnection] = {}

    async def call(self, node: int, body: Any) -> Any:
        if node not in self.open:
            self.open[node] = await self.stack.super_connection(node)
        answer, _raw = await self.open[node].call(body)
        return answer

    def close(self) -> None:
        for conn in self.open.values():
            conn.close()


async def snapshot(stack: Stack, ctx: Ctx) -> Snapshot:
    pool = _Pool(stack)
    try:
        return await _snapshot(pool, stack, ctx)
    finally:
        pool.close()


async def _snapshot(pool: _Pool, stack: Stack, ctx: Ctx) -> Snapshot:
    prefix = stack.victim.prefix
    first = stack.nodes()[0]
    meta = await pool.call(first, request(3, 12, {"topics": None}))
    topics = {
        t.name: {"id": str(t.topic_id), "partitions": {
            int(p.partition_index): int(p.leader_id) for p in t.partitions}}
        for t in meta.topics if t.name and t.name.startswith(prefix)
    }  # fmt: skip
    state: Snapshot = {"topics": {n: {"id": t["id"], "partitions": len(t["partitions"])}
                                  for n, t in topics.items()}}  # fmt: skip
    configs = await pool.call(first, request(32, 4, {
        "resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None}
                      for n in sorted(topics)],
        "include_synonyms": False, "include_documentation": False,
    }))  # fmt: skip
    state["configs"] = {
        r.resource_name: {c.name: c.value for c in r.configs} for r in configs.results
    }
    state["records"] = {}
    for name, topic in sorted(topics.items()):
        for partition, leader in sorted(topic["partitions"].items()):
            state["records"][f"{name}-{partition}"] = await _partition(
                pool, leader, name, partition
            )
    state["groups"] = await _groups(pool, ctx)
    state["transaction"] = await _transaction(pool, ctx)
    if stack.acls_on_brokers:
        acls = await pool.call(first, request(29, 3, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1,
        }))  # fmt: skip
        state["acls"] = sorted(
            (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
             a.operation, a.permission_type)
            for r in acls.resources for a in r.acls
        )  # fmt: skip
    state["policy"] = hashlib.sha256(stack.policy_file.read_bytes()).hexdigest()
    quota = stack.quota_file.read_bytes() if stack.quota_file.exists() else b""
    state["quotas"] = hashlib.sha256(quota).hexdigest()
    return state


async def _partition(pool: _Pool, leader: int, topic: str, partition: int) -> dict[str, Any]:
    ends = {}
    for label, timestamp in (("start", -2), ("end", -1)):
        answer = await pool.call(leader, request(2, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": partition, "current_leader_epoch": -1,
                "timestamp": timestamp}]}],
        }))  # fmt: skip
        (entry,) = answer.topics[0].partitions
        ends[label] = (int(entry.error_code), int(entry.offset))
    fetched = await pool.call(leader, request(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 8 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 8 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }))  # fmt: skip
    (data,) = fetched.responses[0].partitions
    content = hashlib.sha256(bytes(data.records or b"")).hexdigest()[:16]
    return {**ends, "error": int(data.error_code), "content": content}


async def _groups(pool: _Pool, ctx: Ctx) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for group in (ctx.vg, ctx.vcg):
        node = ctx.group_node[group]
        described = await pool.call(
            node, request(15, 5, {"groups": [group], "include_authorized_operations": False})
        )
        (g,) = described.groups
        members = sorted(
            (m.member_id, m.client_id, hashlib.sha256(bytes(m.member_assignment)).hexdigest()[:8])
            for m in g.members
        )
        offsets = await pool.call(node, request(9, 8, {
            "groups": [{"group_id": group, "topics": None}], "require_stable": False,
        }))  # fmt: skip
        committed = sorted(
            (t.name, int(p.partition_index), int(p.committed_offset), p.metadata)
            for t in offsets.groups[0].topics for p in t.partitions
        )  # fmt: skip
        groups[group] = {
            "error": int(g.error_code), "state": g.group_state, "protocol": g.protocol_data,
            "protocol_type": g.protocol_type, "members": members, "offsets": committed,
            "offsets_error": int(offsets.groups[0].error_code),
        }  # fmt: skip
    consumer = await pool.call(ctx.group_node[ctx.vcg], request(69, 0, {
        "group_ids": [ctx.vcg], "include_authorized_operations": False,
    }))  # fmt: skip
    (cg,) = consumer.groups
    groups[f"{ctx.vcg} (consumer)"] = {
        "error": int(cg.error_code), "state": cg.group_state, "epoch": int(cg.group_epoch),
        "assignment_epoch": int(cg.assignment_epoch), "members": len(cg.members),
    }  # fmt: skip
    return groups


async def _transaction(pool: _Pool, ctx: Ctx) -> dict[str, Any]:
    answer = await pool.call(ctx.txn_node[ctx.vtx], request(65, 0, {
        "transactional_ids": [ctx.vtx],
    }))  # fmt: skip
    (t,) = answer.transaction_states
    return {
        "error": int(t.error_code), "state": t.transaction_state,
        "producer_id": int(t.producer_id), "producer_epoch": int(t.producer_epoch),
        "topics": sorted((x.topic, tuple(x.partitions)) for x in t.topics),
    }  # fmt: skip


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """Human-readable differences between two snapshots (empty: unchanged)."""
    found: list[str] = []

    def compare(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if key not in a:
                    found.append(f"{path}/{key}: appeared: {b[key]!r}")
                elif key not in b:
                    found.append(f"{path}/{key}: disappeared (was {a[key]!r})")
                else:
                    compare(a[key], b[key], f"{path}/{key}")
        elif a != b:
            found.append(f"{path}: {a!r} -> {b!r}")

    compare(before, after, "")
    return found
