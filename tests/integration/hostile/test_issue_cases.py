"""The attacks issue 14 names, each at every advertised version of its API: fetch
sessions (KIP-227), "empty means all", foreign topic ids, regex subscriptions
(KIP-848) and the plan's retention limit."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Hostile
from .kafkamsg import has_field, mentions, request
from .scenarios import MB
from .snapshot import differences, snapshot
from .stack import DAY_MS, Ctx, Stack

pytestmark = pytest.mark.integration
SESSION_NOT_FOUND = 70
TOPIC_DENIED = 29
POLICY_VIOLATION, INVALID_CONFIG = 44, 40


@pytest.fixture(autouse=True)
def victim_unchanged(hostile: Hostile) -> Iterator[None]:
    """Each of these tests leaves the victim's state as it found it."""
    stack = hostile.stack
    assert stack.ctx is not None
    before = asyncio.run(snapshot(stack, stack.ctx))
    yield
    changed = differences(before, asyncio.run(snapshot(stack, stack.ctx)))
    assert not changed, "the victim's state changed:\n" + "\n".join(changed)


def _versions(h: Hostile, api: int, low: int = 0) -> list[int]:
    first, last = h.advertised[api]
    versions = list(range(max(first, low), last + 1))
    assert versions, f"API {api} has no advertised version from v{low}"
    return versions


def _leaks(ctx: Ctx, body: Any, answer: Any, raw: bytes) -> list[str]:
    secrets = ctx.secrets()
    named = {k for k, _p in mentions(body, secrets)}
    found = [f"{secrets[k]} at {p}" for k, p in mentions(answer, secrets) if k not in named]
    if ctx.marker.encode() in raw:
        found.append("the victim's records")
    return found


# --- fetch sessions (KIP-227) ---------------------------------------------------------------


def _session_fetch(ctx: Ctx, version: int, session: int, epoch: int, topics: list[Any]) -> Any:
    return request(1, version, {
        "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 0, "max_bytes": MB, "isolation_level": 0,
        "session_id": session, "session_epoch": epoch, "rack_id": "",
        "forgotten_topics_data": [], "topics": topics,
    })  # fmt: skip


def _topic(name: str, topic_id: uuid.UUID, partition: int = 0) -> dict[str, Any]:
    return {"topic": name, "topic_id": topic_id, "partitions": [{
        "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": MB,
        "replica_directory_id": None, "high_watermark": -1}]}  # fmt: skip


async def _fetch_sessions(stack: Stack, version: int, direct: bool = False) -> list[str]:
    """The KIP-227 attacks on the broker port of the victim's partition; ``direct``: both
    tenants straight at the broker (the control: there the attacks work)."""
    ctx = stack.ctx
    assert ctx is not None
    node = ctx.leaders[ctx.vt][0]
    problems: list[str] = []
    if direct:
        victim, attacker = await stack.super_connection(node), await stack.super_connection(node)
    else:
        victim = await stack.connect(stack.victim, node)
        attacker = await stack.connect(stack.attacker, node)
    try:
        opened, raw = await victim.call(
            _session_fetch(ctx, version, 0, 0, [_topic(ctx.vt, ctx.vt_id)])
        )
        session = int(opened.session_id)
        assert opened.error_code == 0 and session != 0, opened
        assert ctx.marker.encode() in raw, "the victim's own session does not read its records"
        epoch = 1
        first, _raw = await victim.call(_session_fetch(ctx, version, session, epoch, []))
        assert first.error_code == 0, first
        never = session
        while never in (session, 0):
            never = random.randrange(1, 2**31)
        # The attacker names the session: the next epochs, a wrong epoch, and never-issued ids.
        for attempt in (epoch + 1, epoch + 2, 1, 7):
            for sid, label in ((session, "foreign"), (never, "never-issued")):
                body = _session_fetch(ctx, version, sid, attempt, [])
                answer, raw = await attacker.call(body)
                problems += [
                    f"{label} id, epoch {attempt}: {leak}"
                    for leak in _leaks(ctx, body, answer, raw)
                ]
                if label == "foreign":
                    foreign = int(answer.error_code)
                elif foreign != int(answer.error_code):
                    problems.append(
                        f"epoch {attempt}: foreign session id answered {foreign}, "
                        f"a never-issued one {int(answer.error_code)} (an oracle)"
                    )
        # A full fetch naming the victim's session (epoch 0 re-creates, -1 closes it).
        for attempt in (0, -1):
            body = _session_fetch(ctx, version, session, attempt, [_topic(ctx.at, ctx.at_id)])
            answer, raw = await attacker.call(body)
            problems += [
                f"full fetch, epoch {attempt}: {leak}" for leak in _leaks(ctx, body, answer, raw)
            ]
        # The victim's session survives all of it.
        for _ in range(2):
            epoch += 1
            later, _raw = await victim.call(_session_fetch(ctx, version, session, epoch, []))
            if later.error_code != 0 or int(later.session_id) != session:
                problems.append(
                    f"victim's incremental fetch (epoch {epoch}) after the attack: "
                    f"error {int(later.error_code)}, session {int(later.session_id)}"
                )
                break
    finally:
        victim.close()
        attacker.close()
    return problems


def test_fetch_sessions_of_another_tenant_cannot_be_read_or_evicted(hostile: Hostile) -> None:
    problems = []
    for version in _versions(hostile, 1, low=7):
        problems += [
            f"v{version}: {p}" for p in asyncio.run(_fetch_sessions(hostile.stack, version))
        ]
    assert not problems, "\n".join(problems[:40])


async def _own_session_widened(stack: Stack, version: int) -> list[str]:
    """The attacker's own incremental session, asked to add the victim's partition."""
    ctx = stack.ctx
    assert ctx is not None
    attacker = await stack.connect(stack.attacker, ctx.leaders[ctx.vt][0])
    problems: list[str] = []
    try:
        own = _session_fetch(ctx, version, 0, 0, [_topic(ctx.at, ctx.at_id)])
        opened, _raw = await attacker.call(own)
        session = int(opened.session_id)
        assert opened.error_code == 0 and session != 0, opened
        body = _session_fetch(ctx, version, session, 1, [_topic(ctx.vt, ctx.vt_id)])
        answer, raw = await attacker.call(body)
        problems += _leaks(ctx, body, answer, raw)
        codes = [
            int(p.error_code)
            for t in answer.responses
            if getattr(t, "topic", None) == ctx.vt or getattr(t, "topic_id", None) == ctx.vt_id
            for p in t.partitions
        ]
        if not codes or set(codes) - {29, 100}:
            problems.append(f"the victim's partition in the attacker's session: codes {codes}")
        later, raw = await attacker.call(_session_fetch(ctx, version, session, 2, []))
        problems += _leaks(ctx, body, later, raw)
    finally:
        attacker.close()
    return problems


def test_own_fetch_session_cannot_be_widened_to_the_victim(hostile: Hostile) -> None:
    problems = []
    for version in _versions(hostile, 1, low=7):
        found = asyncio.run(_own_session_widened(hostile.stack, version))
        problems += [f"v{version}: {p}" for p in found]
    assert not problems, "\n".join(problems[:40])


async def _produce_acks0(stack: Stack, version: int) -> bool:
    """Produce acks=0 (no response) to the victim's topic; whether the connection still
    answers a Metadata request afterwards."""
    ctx = stack.ctx
    assert ctx is not None
    conn = await stack.connect(stack.attacker, ctx.leaders[ctx.vt][0])
    try:
        data = [{"index": 0, "records": ctx.records}]
        topics = [{"name": ctx.vt, "topic_id": ctx.vt_id, "partition_data": data}]
        body = request(0, version, {"acks": 0, "timeout": 5000, "topic_data": topics})
        await conn.send(body)
        try:
            answer, _raw = await conn.call(request(3, 12, {"topics": []}), timeout_s=5)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            return False
        assert answer.topics == (), answer  # the Metadata answer, not a Produce one
        return True
    finally:
        conn.close()


def test_produce_acks0_to_the_victim_writes_nothing(hostile: Hostile) -> None:
    """acks=0 has no response to carry a denial: nothing may be written (the autouse
    check compares the victim's records), whatever happens to the connection."""
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    before = asyncio.run(snapshot(stack, ctx))
    for version in _versions(hostile, 0):
        asyncio.run(_produce_acks0(stack, version))
    assert differences(before, asyncio.run(snapshot(stack, ctx))) == []


def test_control_without_the_gateway_the_fetch_session_attacks_work(hostile: Hostile) -> None:
    """Straight at the broker the same attacks read the victim's records and evict its
    session: the checks above see them when they happen."""
    version = hostile.advertised[1][1]
    problems = asyncio.run(_fetch_sessions(hostile.stack, version, direct=True))
    assert any("victim's records" in p for p in problems), problems
    assert any("victim's incremental fetch" in p for p in problems), problems


def test_a_foreign_session_id_answers_like_a_never_issued_one(hostile: Hostile) -> None:
    """The oracle on its own: FETCH_SESSION_ID_NOT_FOUND for both (never
    INVALID_FETCH_SESSION_EPOCH for the foreign one)."""
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    version = hostile.advertised[1][1]

    async def probe() -> tuple[list[int], list[int]]:
        node = ctx.leaders[ctx.vt][0]
        victim = await stack.connect(stack.victim, node)
        attacker = await stack.connect(stack.attacker, node)
        try:
            opened, _raw = await victim.call(
                _session_fetch(ctx, version, 0, 0, [_topic(ctx.vt, ctx.vt_id)])
            )
            session = int(opened.session_id)
            foreign, never = [], []
            for epoch in (5, 9):
                a, _r = await attacker.call(_session_fetch(ctx, version, session, epoch, []))
                b, _r = await attacker.call(
                    _session_fetch(ctx, version, session ^ 0x5A5A5A5A, epoch, [])
                )
                foreign.append(int(a.error_code))
                never.append(int(b.error_code))
            return foreign, never
        finally:
            victim.close()
            attacker.close()

    foreign, never = asyncio.run(probe())
    assert foreign == never == [SESSION_NOT_FOUND, SESSION_NOT_FOUND], (foreign, never)


# --- "empty means all" and foreign topic ids ------------------------------------------------


async def _ask(stack: Stack, body: Any) -> tuple[Any, bytes]:
    conn = await stack.connect(stack.attacker)
    try:
        answer: tuple[Any, bytes] = await conn.call(body)
        return answer
    finally:
        conn.close()


def test_metadata_v0_empty_list_and_describe_topic_partitions_empty_list(hostile: Hostile) -> None:
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    problems = []
    bodies = [request(3, 0, {"topics": []})]
    bodies += [request(75, v, {"topics": [], "response_partition_limit": 2000, "cursor": None})
               for v in _versions(hostile, 75)]  # fmt: skip
    for body in bodies:
        answer, raw = asyncio.run(_ask(stack, body))
        names = {t.name for t in answer.topics}
        where = f"{type(body).__name__} v{body.__version__}"
        if ctx.at not in names:
            problems.append(
                f"{where}: the attacker's own topic is not listed ({sorted(names)[:5]})"
            )
        problems += [f"{where}: {leak}" for leak in _leaks(ctx, body, answer, raw)]
        problems += [f"{where}: lists {n}" for n in names if n.startswith(stack.victim.prefix)]
    assert not problems, "\n".join(problems)


def test_metadata_own_name_with_victim_topic_id(hostile: Hostile) -> None:
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    problems = []
    versions = [v for v in _versions(hostile, 3) if has_field(3, v, "topics.topic_id")]
    assert 12 in versions, versions
    for version in versions:
        for name in (ctx.at, None):
            body = request(3, version, {"topics": [{"name": name, "topic_id": ctx.vt_id}],
                                        "allow_auto_topic_creation": False})  # fmt: skip
            answer, raw = asyncio.run(_ask(stack, body))
            leaks = _leaks(ctx, body, answer, raw)
            returned = [t for t in answer.topics if t.topic_id == ctx.vt_id and t.error_code == 0]
            if returned:
                leaks.append(
                    f"the victim's topic id answered with {len(returned[0].partitions)} partitions"
                )
            problems += [f"v{version} name={name}: {leak}" for leak in leaks]
    assert not problems, "\n".join(problems)


# --- regex subscriptions (KIP-848) ----------------------------------------------------------


async def _regex_member(stack: Stack, regex: str) -> tuple[set[uuid.UUID] | None, list[str]]:
    """Join the attacker's own group subscribed to ``regex``; the topic ids it gets
    assigned within a few seconds (None: the subscription was refused with
    TOPIC_AUTHORIZATION_FAILED), and anything of the victim's seen on the way."""
    ctx = stack.ctx
    assert ctx is not None
    conn = await stack.connect(stack.attacker, ctx.group_node[ctx.acg])
    member, epoch = str(uuid.uuid4()), 0
    assigned: set[uuid.UUID] = set()
    leaks: list[str] = []
    try:
        deadline = asyncio.get_running_loop().time() + 12
        while asyncio.get_running_loop().time() < deadline:
            body = request(68, 1, {
                "group_id": ctx.acg, "member_id": member, "member_epoch": epoch,
                "rebalance_timeout": 10_000, "subscribed_topic_regex": regex,
                "subscribed_topic_names": None if epoch else [],
                "topic_partitions": None if epoch else [],
            })  # fmt: skip
            beat, raw = await conn.call(body)
            leaks += _leaks(ctx, body, beat, raw)
            if epoch == 0 and beat.error_code == TOPIC_DENIED and not beat.member_id:
                return None, leaks  # refused (the gateway cannot authorize a regex)
            assert beat.error_code == 0, beat
            epoch = int(beat.member_epoch)
            if beat.assignment is not None:
                assigned = {t.topic_id for t in beat.assignment.topic_partitions}
            if ctx.at_id in assigned:
                break
            await asyncio.sleep(0.5)
        body = request(69, 1, {"group_ids": [ctx.acg], "include_authorized_operations": True})
        described, raw = await conn.call(body)
        leaks += [f"ConsumerGroupDescribe: {leak}" for leak in _leaks(ctx, body, described, raw)]
        await conn.call(request(68, 1, {
            "group_id": ctx.acg, "member_id": member, "member_epoch": -1,
            "subscribed_topic_names": None, "topic_partitions": None,
        }))  # fmt: skip
    finally:
        conn.close()
    return assigned, leaks


@pytest.mark.parametrize("regex", [".*", "vic.*", "(.*)\\.orders"])
def test_regex_subscription_gets_only_own_topics(hostile: Hostile, regex: str) -> None:
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    assert hostile.advertised[68][1] >= 1, "ConsumerGroupHeartbeat v1 (regex) is not advertised"
    assigned, leaks = asyncio.run(_regex_member(stack, regex))
    assert not leaks, leaks
    if assigned is None:  # refused outright: nothing can be assigned
        return
    if regex == ".*":
        assert ctx.at_id in assigned, "the regex never matched the attacker's own topic"
    victims = assigned & {ctx.vt_id, ctx.vt2_id}
    assert not victims and not leaks, (sorted(map(str, victims)), leaks)


# --- plan limits: retention.ms the broker trims -------------------------------------------

TRIMMED = ["\x01-1", "\x00-1", " \x1f-1\t", "-1\x0b"]


async def _retention_of(stack: Stack, topic: str) -> str | None:
    conn = await stack.super_connection(stack.nodes()[0])
    try:
        answer, _raw = await conn.call(request(32, 4, {
            "resources": [{"resource_type": 2, "resource_name": topic,
                           "configuration_keys": ["retention.ms"]}],
            "include_synonyms": False, "include_documentation": False,
        }))  # fmt: skip
    finally:
        conn.close()
    (result,) = answer.results
    if result.error_code != 0:
        return None
    return next((c.value for c in result.configs if c.name == "retention.ms"), None)


async def _delete_directly(stack: Stack, topic: str) -> None:
    conn = await stack.super_connection(stack.nodes()[0])
    try:
        await conn.call(
            request(20, 6, {"topics": [{"name": topic, "topic_id": None}], "timeout": 10_000})
        )
    finally:
        conn.close()


def _within_plan(value: str | None) -> bool:
    return value is not None and 0 <= int(value) <= DAY_MS


def _alter(api: int, version: int, topic: str, value: str) -> Any:
    config = {"name": "retention.ms", "value": value, "config_operation": 0}
    resource = {"resource_type": 2, "resource_name": topic, "configs": [config]}
    return request(api, version, {"validate_only": False, "resources": [resource]})


def _create(version: int, topic: str, value: str) -> Any:
    return request(19, version, {"timeout": 10_000, "validate_only": False, "topics": [{
        "name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": [],
        "configs": [{"name": "retention.ms", "value": value}]}]})  # fmt: skip


def test_retention_the_broker_trims_cannot_pass_the_plan(hostile: Hostile) -> None:
    """retention.ms = "\\x01-1" (and other values Java's trim() turns into -1, infinite)
    through AlterConfigs, IncrementalAlterConfigs and CreateTopics, on the attacker's own
    topics: refused, and the cluster never holds a retention beyond the plan's."""
    stack, ctx = hostile.stack, hostile.stack.ctx
    assert ctx is not None
    own = f"{stack.attacker.prefix}retention"
    before = asyncio.run(snapshot(stack, ctx))
    original = asyncio.run(_retention_of(stack, own))
    problems = []
    for value in TRIMMED:
        for api in (33, 44):
            for version in _versions(hostile, api):
                answer, _raw = asyncio.run(_ask(stack, _alter(api, version, own, value)))
                code = int(answer.responses[0].error_code)
                now = asyncio.run(_retention_of(stack, own))
                if code == 0 or (now != original and not _within_plan(now)):
                    problems.append(f"API {api} v{version} {value!r}: error {code}, now {now}")
        for version in _versions(hostile, 19):
            name = f"{stack.attacker.prefix}rt{version}-{uuid.uuid4().hex[:4]}"
            answer, _raw = asyncio.run(_ask(stack, _create(version, name, value)))
            code = int(answer.topics[0].error_code)
            created = asyncio.run(_retention_of(stack, name))
            if code == 0 or created is not None:
                problems.append(f"CreateTopics v{version} {value!r}: error {code}, "
                                f"created with retention.ms {created}")  # fmt: skip
                asyncio.run(_delete_directly(stack, name))
    assert differences(before, asyncio.run(snapshot(stack, ctx))) == []
    assert not problems, "\n".join(problems[:40])
