"""Fetch sessions (KIP-227) bound to their connection, authorized whole, epochs kept right.

Pure ``FetchSessions`` exchanges, then the same through real ``Session`` objects with a
casbin ``Enforcer``: what reaches the broker is decoded and checked, no sockets."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from gateway.addresses.topology import PublicMap
from gateway.enforcement import Enforcer
from gateway.enforcement.fetch_sessions import FetchSessions, next_epoch
from gateway.identity import ClientIdentity
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_head,
)
from gateway.protocol.errors import error_response
from gateway.session import Session

from ..conftest import MakeAuthorizer

RC = FetchResponse


def part(index: int, offset: int = 0) -> FetchPartition:
    return FetchPartition(
        partition=i32(index), fetch_offset=i64(offset), partition_max_bytes=i32(1 << 20)
    )


def fetch(
    session_id: int,
    epoch: int,
    topics: dict[str, list[FetchPartition]] | None = None,
    forgotten: dict[str, list[int]] | None = None,
) -> FetchRequest:
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1),
        session_id=i32(session_id),
        session_epoch=i32(epoch),
        topics=tuple(
            FetchTopic(topic=TopicName(t), partitions=tuple(ps)) for t, ps in (topics or {}).items()
        ),
        forgotten_topics_data=tuple(
            ForgottenTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in (forgotten or {}).items()
        ),
    )


def keys(request: Any) -> set[tuple[str, int]]:
    return {(t.topic, int(p.partition)) for t in request.topics for p in t.partitions}


def forgotten_keys(request: Any) -> set[tuple[str, int]]:
    return {(t.topic, int(p)) for t in request.forgotten_topics_data for p in t.partitions}


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic, int(p.partition_index)): int(p.error_code)
        for t in response.responses
        for p in t.partitions
    }


def empty_response(session_id: int) -> FetchResponse:
    base = error_response(RC, ErrorCode.none)
    return dataclasses.replace(base, session_id=i32(session_id))  # type: ignore[type-var]


def open_session(sessions: FetchSessions, allowed: Any = None, session_id: int = 77) -> None:
    plan = sessions.plan(fetch(0, 0, {"a.x": [part(0), part(1)], "a.y": [part(0)]}), RC, allowed)
    assert plan.forward is not None and plan.commit is not None
    plan.commit(0, session_id)
    assert session_id in sessions


def test_next_epoch_is_kafkas() -> None:
    assert [next_epoch(e) for e in (-1, 0, 1, 2**31 - 1)] == [-1, 1, 2, 1]


def test_a_full_fetch_creates_a_session_the_broker_named() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    plan = sessions.plan(fetch(77, 1), RC, None)
    assert plan.forward is not None and int(plan.forward.session_epoch) == 1
    assert plan.effective and {k for k in plan.effective} == {("a.x", 0), ("a.x", 1), ("a.y", 0)}


@pytest.mark.parametrize("epoch", [1, 2, 5])
def test_a_session_this_connection_did_not_create_is_not_found_here(epoch: int) -> None:
    owner, stranger = FetchSessions(), FetchSessions()
    open_session(owner)
    foreign = stranger.plan(fetch(77, epoch), RC, None)  # the owner's live id
    never = stranger.plan(fetch(123456, epoch), RC, None)  # an id nobody was given
    assert foreign.forward is None and never.forward is None  # nothing reaches a broker
    assert int(foreign.local.error_code) == int(never.local.error_code) == 70
    assert foreign.local == never.local  # no oracle: the same answer
    assert int(owner.plan(fetch(77, 1), RC, None).forward.session_epoch) == 1  # untouched


@pytest.mark.parametrize("epoch", [0, -1])
def test_a_full_fetch_naming_a_foreign_session_cannot_close_it(epoch: int) -> None:
    stranger = FetchSessions()
    plan = stranger.plan(fetch(77, epoch, {"b.t": [part(0)]}), RC, None)
    assert plan.forward is not None and int(plan.forward.session_id) == 0


def test_a_wrong_epoch_on_the_own_session_is_refused_like_a_broker() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    plan = sessions.plan(fetch(77, 3), RC, None)
    assert plan.forward is None and int(plan.local.error_code) == 71


def test_an_empty_incremental_fetch_reads_only_allowed_partitions_of_the_session() -> None:
    sessions = FetchSessions()
    open_session(sessions, allowed=lambda t: t == "a.x")  # a.y refused from the start
    plan = sessions.plan(fetch(77, 1), RC, lambda t: t == "a.x")
    assert plan.forward is not None and plan.denied == 1
    assert keys(plan.forward) == set() and forgotten_keys(plan.forward) == set()
    assert plan.merge is not None
    merged = plan.merge(empty_response(77))
    assert codes(merged) == {("a.y", 0): 29}  # every response reports it, as a broker does


def test_a_policy_change_mid_stream_forgets_upstream_and_keeps_the_epochs() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    first = sessions.plan(fetch(77, 1, {"a.x": [part(0, 10)]}), RC, None)
    assert int(first.forward.session_epoch) == 1 and keys(first.forward) == {("a.x", 0)}
    first.commit(0, 77)
    only_x = lambda t: t == "a.x"  # noqa: E731 -- a.y's READ revoked
    second = sessions.plan(fetch(77, 2), RC, only_x)
    assert int(second.forward.session_epoch) == 2
    assert forgotten_keys(second.forward) == {("a.y", 0)}  # the broker stops serving it
    assert codes(second.merge(empty_response(77))) == {("a.y", 0): 29}
    second.commit(0, 77)
    third = sessions.plan(fetch(77, 3, {"a.x": [part(1, 5)]}), RC, only_x)
    assert int(third.forward.session_epoch) == 3 and forgotten_keys(third.forward) == set()
    assert keys(third.forward) == {("a.x", 1)}
    assert codes(third.merge(empty_response(77))) == {("a.y", 0): 29}
    third.commit(0, 77)
    back = sessions.plan(fetch(77, 4), RC, None)  # READ granted again: re-added as last sent
    assert keys(back.forward) == {("a.y", 0)} and back.merge is None


def test_an_incremental_fetch_saying_what_the_broker_needs_is_forwarded_as_it_is() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    steady = fetch(77, 1)
    plan = sessions.plan(steady, RC, None)
    assert plan.forward is steady  # the client's own bytes go on: nothing re-encoded
    plan.commit(0, 77)
    moved = fetch(77, 2, {"a.x": [part(0, 90)]}, forgotten={"a.y": [0]})
    plan = sessions.plan(moved, RC, None)
    assert plan.forward is moved
    plan.commit(0, 77)
    assert sessions.plan(fetch(77, 3), RC, lambda t: t == "a.x").forward is not None


@pytest.mark.parametrize(
    ("request_", "allowed"),
    [
        (fetch(77, 1, {"a.y": [part(0, 5)]}), lambda t: t == "a.x"),  # names a refused topic
        (fetch(77, 1), lambda t: t == "a.x"),  # the session holds one that became refused
        (fetch(77, 1, {"a.x": [part(0, 0)]}), None),  # re-sends what the broker has
        (fetch(77, 1, {"a.x": [part(1, 3), part(1, 4)]}), None),  # names a partition twice
        (fetch(77, 1, forgotten={"a.z": [0]}), None),  # forgets what the broker never had
        (fetch(77, 1, forgotten={"a.y": [0, 0]}), None),  # forgets one twice
    ],
)
def test_an_incremental_fetch_that_differs_from_what_the_broker_needs_is_rebuilt(
    request_: FetchRequest, allowed: Any
) -> None:
    sessions = FetchSessions()
    open_session(sessions)
    plan = sessions.plan(request_, RC, allowed)
    assert plan.forward is not None and plan.forward is not request_
    readable = allowed or (lambda _t: True)
    assert all(readable(topic) for topic, _ in keys(plan.forward))


def test_a_locally_answered_fetch_advances_the_clients_epoch_only() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    throttled = sessions.plan(fetch(77, 1, {"a.x": [part(0, 40)]}), RC, None, local=True)
    assert throttled.forward is None
    assert int(throttled.local.session_id) == 77 and int(throttled.local.error_code) == 0
    nxt = sessions.plan(fetch(77, 2), RC, None)  # the client's next epoch is accepted
    assert nxt.forward is not None
    assert int(nxt.forward.session_epoch) == 1  # the broker never saw epoch 1
    assert keys(nxt.forward) == {("a.x", 0)}  # the change made meanwhile reaches it
    assert int(nxt.forward.topics[0].partitions[0].fetch_offset) == 40


def test_nothing_readable_is_answered_at_once_with_the_session_kept() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    plan = sessions.plan(fetch(77, 1), RC, lambda _t: False)
    assert plan.forward is None and int(plan.local.session_id) == 77
    assert codes(plan.local) == {("a.x", 0): 29, ("a.x", 1): 29, ("a.y", 0): 29}
    assert sessions.plan(fetch(77, 2), RC, None).forward is not None


def test_forgotten_partitions_leave_the_session() -> None:
    sessions = FetchSessions()
    open_session(sessions)
    plan = sessions.plan(fetch(77, 1, forgotten={"a.y": [0]}), RC, None)
    assert forgotten_keys(plan.forward) == {("a.y", 0)}
    plan.commit(0, 77)
    later = sessions.plan(fetch(77, 2), RC, lambda t: t == "a.x")
    assert later.denied == 0 and later.merge is None  # a.y is no longer the client's


@pytest.mark.parametrize(("error", "session_id"), [(70, 0), (71, 77), (0, 0)])
def test_a_session_the_broker_dropped_is_dropped(error: int, session_id: int) -> None:
    sessions = FetchSessions()
    open_session(sessions)
    sessions.plan(fetch(77, 1), RC, None).commit(error, session_id)
    assert 77 not in sessions
    assert int(sessions.plan(fetch(77, 2), RC, None).local.error_code) == 70


def test_sessions_per_connection_are_bounded() -> None:
    sessions = FetchSessions(limit=2)
    for session_id in (1, 2, 3):
        sessions.plan(fetch(0, 0, {"a.x": [part(0)]}), RC, None).commit(0, session_id)
    assert 1 not in sessions and 2 in sessions and 3 in sessions


# -- through real sessions ------------------------------------------------------


def identity(principal: str) -> ClientIdentity:
    return ClientIdentity(listener="t", host="127.0.0.1", port=1, principal=principal)


def upstream_request(out: bytes | None) -> Any:
    assert out is not None
    payload = memoryview(out)[4:]
    return decode_request(parse_request_head(payload), payload)


def test_two_tenants_on_one_broker_port_cannot_share_a_session(
    mapping: PublicMap, make_authorizer: MakeAuthorizer
) -> None:
    authorizer = make_authorizer(
        [
            "p, User:alice, TOPIC, PREFIXED, a., READ, *, allow",
            "p, User:bob, TOPIC, PREFIXED, b., READ, *, allow",
        ]
    )
    sessions = {}
    for name in ("alice", "bob"):
        who = identity(f"User:{name}")
        sessions[name] = Session(mapping, who, Enforcer(authorizer, who))
    bob, alice = sessions["bob"], sessions["alice"]
    out = bob.on_request(encode_request(1, 12, 1, "b", fetch(0, 0, {"b.secret": [part(0)]})))
    assert upstream_request(out).topics[0].topic == "b.secret"
    bob.on_response(encode_response(1, 12, 1, empty_response(4242)))
    bob.take_ready()
    assert 4242 in bob.fetch_sessions  # type: ignore[operator]
    # alice names bob's session with the next epoch and no topics
    assert alice.on_request(encode_request(1, 12, 7, "a", fetch(4242, 1))) is None
    (reply,) = alice.take_ready()
    answer = decode_response(memoryview(reply)[4:], 1, 12, FetchResponse)
    assert int(answer.error_code) == 70 and answer.responses == ()
    # bob's session goes on as before
    out = bob.on_request(encode_request(1, 12, 2, "b", fetch(4242, 1)))
    assert int(upstream_request(out).session_epoch) == 1


def test_a_partly_denied_incremental_fetch_still_reaches_the_broker(
    mapping: PublicMap, make_authorizer: MakeAuthorizer
) -> None:
    who = identity("User:alice")
    both = make_authorizer(["p, User:alice, TOPIC, PREFIXED, a., READ, *, allow"])
    only_x = make_authorizer(["p, User:alice, TOPIC, LITERAL, a.x, READ, *, allow"])
    session = Session(mapping, who, Enforcer(both, who))
    first = fetch(0, 0, {"a.x": [part(0)], "a.y": [part(0)]})
    session.on_request(encode_request(1, 12, 1, "c", first))
    session.on_response(encode_response(1, 12, 1, empty_response(9)))
    session.take_ready()
    session.enforcer.authorizer = only_x  # type: ignore[union-attr]  # the policy changes
    for epoch in (1, 2, 3):
        out = session.on_request(encode_request(1, 12, 10 + epoch, "c", fetch(9, epoch)))
        forwarded = upstream_request(out)
        assert int(forwarded.session_epoch) == epoch  # forwarded, so the broker's epoch moves
        assert forgotten_keys(forwarded) == ({("a.y", 0)} if epoch == 1 else set())
        session.on_response(encode_response(1, 12, 10 + epoch, empty_response(9)))
        (reply,) = session.take_ready()
        answer = decode_response(memoryview(reply)[4:], 1, 12, FetchResponse)
        assert int(answer.error_code) == 0 and codes(answer) == {("a.y", 0): 29}


def test_sessions_stay_bound_when_only_the_brokers_decide(mapping: PublicMap) -> None:
    """authorization.gateway_checks: false: no Enforcer, sessions still bound."""
    owner = Session(mapping, identity("User:bob"), bind_fetch_sessions=True)
    stranger = Session(mapping, identity("User:alice"), bind_fetch_sessions=True)
    owner.on_request(encode_request(1, 12, 1, "b", fetch(0, 0, {"b.secret": [part(0)]})))
    owner.on_response(encode_response(1, 12, 1, empty_response(31)))
    owner.take_ready()
    for epoch in (0, -1):  # a full fetch naming it must not close it
        out = stranger.on_request(encode_request(1, 12, 5, "a", fetch(31, epoch)))
        assert int(upstream_request(out).session_id) == 0
        stranger.on_response(encode_response(1, 12, 5, empty_response(0)))
        stranger.take_ready()
    assert stranger.on_request(encode_request(1, 12, 6, "a", fetch(31, 1))) is None
    (reply,) = stranger.take_ready()
    assert int(decode_response(memoryview(reply)[4:], 1, 12, FetchResponse).error_code) == 70
