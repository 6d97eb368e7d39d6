"""Every API x version x attack of the scenario table, against the real cluster."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import Hostile
from .kafkamsg import request
from .runner import refused_unadvertised, run
from .scenarios import ATTACKS, Attack, by_id
from .snapshot import differences, snapshot
from .stack import record_batch

pytestmark = pytest.mark.integration

# APIs that name no topic, group, transactional id, topic id, session or regex.
NO_RESOURCE = {17: "SaslHandshake", 18: "ApiVersions", 36: "SaslAuthenticate",
               60: "DescribeCluster"}  # fmt: skip


def test_every_advertised_api_that_names_a_resource_is_attacked(hostile: Hostile) -> None:
    print("advertised to the attacker:", dict(sorted(hostile.advertised.items())))
    covered = {a.api for a in by_id().values()}
    missing = set(hostile.advertised) - covered - set(NO_RESOURCE)
    assert not missing, f"advertised to a tenant but not in the scenario table: {sorted(missing)}"


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_attack(hostile: Hostile, attack: Attack) -> None:
    if attack.modes is not None and hostile.stack.mode not in attack.modes:
        assert attack.instead is not None, f"{attack.id}: `instead` names its stand-in"
        attack = by_id()[attack.instead]  # the form this mode can judge
    outcome = asyncio.run(run(hostile.stack, attack, hostile.advertised))
    print(f"{attack.id}: API {attack.api} attacked at versions {outcome.versions}")
    if attack.optional and attack.api not in hostile.advertised:
        # share groups name topics by id only: not offered to a tenant, refused if sent
        problems = asyncio.run(refused_unadvertised(hostile.stack, attack))
        assert not problems, f"{attack.id} (API {attack.api}, not advertised):\n" + "\n".join(
            problems[:40]
        )
        return
    assert outcome.versions, f"API {attack.api} is not advertised at any version this form has"
    report = outcome.problems + [f"victim state: {d}" for d in outcome.state]
    assert not report, (
        f"{attack.id} (API {attack.api}, versions {outcome.versions}):\n" + "\n".join(report[:40])
    )


# Read-only attacks that, sent by the victim itself, must be judged a success: the
# checks above can fail (a denial, a missing name or a leak is seen when it happens).
CONTROL = [
    "fetch-victim-topic", "list-offsets-victim-topic", "metadata-victim-name",
    "metadata-all-null-or-v0-empty", "describe-topic-partitions-empty-means-all",
    "offset-fetch-multi-group-mixed", "describe-groups-victim", "list-groups-all",
    "consumer-group-describe-victim", "describe-configs-victim-topic",
    "describe-producers-victim", "describe-transactions-victim", "find-coordinator-victim-group",
]  # fmt: skip


@pytest.mark.parametrize("attack_id", CONTROL)
def test_control_the_victim_itself_is_not_denied(hostile: Hostile, attack_id: str) -> None:
    stack = hostile.stack
    outcome = asyncio.run(run(stack, by_id()[attack_id], hostile.advertised, stack.victim))
    assert outcome.versions
    unseen = [
        v for v, flagged in zip(outcome.versions, outcome.flagged, strict=True) if not flagged
    ]
    assert not unseen, f"the victim's own request passed the attacker's checks at versions {unseen}"


def test_control_the_snapshot_sees_writes_and_commits(hostile: Hostile) -> None:
    """The victim writes a record and commits an offset: the snapshot sees both (then the
    suite's baseline moves on to the new state)."""
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    before = asyncio.run(snapshot(stack, ctx))

    async def act() -> None:
        conn = await stack.connect(stack.victim, ctx.leaders[ctx.vt2][0])
        try:
            produced, _raw = await conn.call(request(0, 9, {
                "transactional_id": None, "acks": 1, "timeout": 5000,
                "topic_data": [{"name": ctx.vt2, "partition_data": [
                    {"index": 0, "records": record_batch(b"victim-write")}]}]}))  # fmt: skip
            assert produced.responses[0].partition_responses[0].error_code == 0, produced
        finally:
            conn.close()
        conn = await stack.connect(stack.victim, ctx.group_node[ctx.vcg])
        try:
            committed, _raw = await conn.call(request(8, 8, {
                "group_id": ctx.vcg, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": ctx.vt, "partitions": [{
                    "partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1,
                    "committed_metadata": "moved"}]}]}))  # fmt: skip
            assert committed.topics[0].partitions[0].error_code == 0, committed
        finally:
            conn.close()

    asyncio.run(act())
    after = asyncio.run(snapshot(stack, ctx))
    changed = differences(before, after)
    hostile.baseline = after
    assert any("/records/" in c for c in changed), changed
    assert any("/groups/" in c and "offsets" in c for c in changed), changed
