"""The state table (``core.states.TABLE``) and a real ``Connection`` held to it: every
state has a row, an event a state does not list closes the connection as the gateway's
fault, CLOSED ignores everything, and each listed (state, event) pair, driven for real,
ends in a state its row allows."""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.core import commands as cmd
from gateway.core.events import (
    Closed,
    Drain,
    Event,
    Opened,
    RequestFrames,
    ResponseFrames,
    StepDone,
    TimerFired,
    WorkDone,
)
from gateway.core.states import TABLE, State

from ..conftest import MakeAuthorizer
from .harness import HOST, Harness, build

EVENT_TYPES: tuple[type, ...] = typing.get_args(Event)

METADATA = {"api": "Metadata", "version": 12, "id": 1, "body": {"topics": [{"name": "a"}]}}
API_VERSIONS = {"api": "ApiVersions", "version": 3, "id": 11}
HANDSHAKE = {"api": "SaslHandshake", "version": 1, "id": 12, "body": {"mechanism": "PLAIN"}}
AUTHENTICATE = {"api": "SaslAuthenticate", "version": 2, "id": 13, "plain": "right"}
WRONG = {"api": "SaslAuthenticate", "version": 2, "id": 13, "plain": "wrong"}
UNKNOWN_KEY = {"api": "Metadata", "version": 12, "id": 14, "as_key": 999}
ALTER = {
    "api": "AlterClientQuotas", "version": 1, "id": 15,
    "body": {"entries": [{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                          "ops": [{"key": "producer_byte_rate", "value": 1000.0,
                                   "remove": False}]}]},
}  # fmt: skip
SASL: dict[str, Any] = {"auth": "sasl"}
QUOTAS: dict[str, Any] = {"principal": "User:admin", "tenant": "acme", "quotas": {}}
DELAYING: dict[str, Any] = {
    "auth": "sasl", "limiter": {"max_failures": 1, "base_delay_s": 2, "max_delay_s": 8},
}  # fmt: skip


async def _requests(h: Harness, *specs: dict[str, Any]) -> None:
    h.handle(RequestFrames([h.request(spec) for spec in specs]))


# Each builder brings a fresh connection into one state (its name's first word).
async def new(h: Harness) -> None:
    return None


async def opened(h: Harness) -> None:
    h.handle(Opened(HOST))


async def open_inflight(h: Harness) -> None:
    await opened(h)
    await _requests(h, METADATA)


async def authenticating_inflight(h: Harness) -> None:
    await opened(h)
    await _requests(h, API_VERSIONS)


async def stepping(h: Harness) -> None:
    await opened(h)
    await _requests(h, HANDSHAKE, AUTHENTICATE)


async def stepping_inflight(h: Harness) -> None:
    await opened(h)
    await _requests(h, API_VERSIONS, HANDSHAKE, AUTHENTICATE)


async def stepping_delayed(h: Harness) -> None:
    await opened(h)
    await _requests(h, HANDSHAKE, WRONG)
    h.handle(await h.step_done())


async def working(h: Harness) -> None:
    await opened(h)
    await _requests(h, METADATA, ALTER)


async def closing(h: Harness) -> None:
    await open_inflight(h)
    h.handle(Drain())


async def closed(h: Harness) -> None:
    await opened(h)
    h.handle(Closed("client disconnected"))


Builder = Callable[[Harness], Awaitable[None]]
STATES: dict[State, tuple[dict[str, Any], Builder]] = {
    State.NEW: ({}, new),
    State.AUTHENTICATING: (SASL, opened),
    State.OPEN: ({}, opened),
    State.STEPPING: (SASL, stepping),
    State.WORKING: (QUOTAS, working),
    State.CLOSING: ({}, closing),
    State.CLOSED: ({}, closed),
}


async def bring(
    setup: dict[str, Any], builder: Builder, tmp_path: Path, authorizer: MakeAuthorizer
) -> Harness:
    harness = await build(setup, tmp_path, authorizer)
    await builder(harness)
    return harness


def examples(h: Harness) -> dict[type, Event]:
    """One event of each type (for states that must not look inside it)."""
    return {
        Opened: Opened(HOST),
        RequestFrames: RequestFrames([h.request(METADATA)]),
        ResponseFrames: ResponseFrames([b"\x00\x00\x00\x04\x00\x00\x00\x63"]),
        StepDone: StepDone(None, RuntimeError("late")),
        WorkDone: WorkDone(None),
        TimerFired: TimerFired("throttle"),
        Drain: Drain(),
        Closed: Closed("client disconnected"),
    }


# -- the table itself ---------------------------------------------------------------


def test_every_state_has_a_row_of_known_events_and_states() -> None:
    assert set(TABLE) == set(State)
    for state, row in TABLE.items():
        assert set(row) <= set(EVENT_TYPES), state
        for event, after in row.items():
            assert after, f"{state} on {event.__name__} leads nowhere"
            assert all(isinstance(s, State) for s in after), (state, event)


def test_new_accepts_only_opened_drain_and_closed() -> None:
    assert set(TABLE[State.NEW]) == {Opened, Drain, Closed}


def test_closed_accepts_nothing_and_everything_else_accepts_closed() -> None:
    assert TABLE[State.CLOSED] == {}
    for state, row in TABLE.items():
        if state is not State.CLOSED:
            assert row[Closed] == frozenset({State.CLOSED}), state


def test_the_states_that_wait_for_an_answer_accept_only_theirs() -> None:
    assert StepDone in TABLE[State.STEPPING] and WorkDone not in TABLE[State.STEPPING]
    assert WorkDone in TABLE[State.WORKING] and StepDone not in TABLE[State.WORKING]
    for state in set(State) - {State.STEPPING, State.WORKING}:
        assert StepDone not in TABLE[state] and WorkDone not in TABLE[state], state


# -- a real Connection held to it ---------------------------------------------------


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
async def test_closed_ignores_every_event(
    event_type: type, tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    h = await bring({}, closed, tmp_path, make_authorizer)
    assert h.connection.state is State.CLOSED
    assert h.handle(examples(h)[event_type]) == []
    assert h.connection.state is State.CLOSED


UNLISTED = [
    (state, event)
    for state, row in TABLE.items()
    if state is not State.CLOSED
    for event in EVENT_TYPES
    if event not in row
]


@pytest.mark.parametrize(
    ("state", "event_type"), UNLISTED, ids=[f"{s.value}-{e.__name__}" for s, e in UNLISTED]
)
async def test_an_unlisted_event_closes_as_the_gateways_fault(
    state: State, event_type: type, tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    setup, builder = STATES[state]
    h = await bring(setup, builder, tmp_path, make_authorizer)
    try:
        assert h.connection.state is state
        commands = h.handle(examples(h)[event_type])
        assert len(commands) == 1 and isinstance(commands[0], cmd.Close), commands
        assert commands[0].side == "gateway"
        assert "not expected" in commands[0].reason
        assert h.connection.state is State.CLOSED
        assert h.handle(examples(h)[event_type]) == []  # and stays closed
    finally:
        await h.close()


def test_the_unlisted_pairs_include_the_obvious_mistakes() -> None:
    for pair in [
        (State.OPEN, WorkDone),
        (State.OPEN, StepDone),
        (State.NEW, RequestFrames),
        (State.STEPPING, WorkDone),
        (State.WORKING, StepDone),
        (State.CLOSING, Opened),
    ]:
        assert pair in UNLISTED, pair


EventOf = Callable[[Harness], Awaitable[Event]]


async def _frames(h: Harness, *specs: dict[str, Any]) -> Event:
    return RequestFrames([h.request(spec) for spec in specs])


async def _response(h: Harness) -> Event:
    return ResponseFrames([h.response({})])


async def _step(h: Harness) -> Event:
    return await h.step_done()


async def _work(h: Harness) -> Event:
    return await h.work_done()


def _fixed(event: Event) -> EventOf:
    async def make(h: Harness) -> Event:
        return event

    return make


def _sending(*specs: dict[str, Any]) -> EventOf:
    async def make(h: Harness) -> Event:
        return await _frames(h, *specs)

    return make


LIMITED: dict[str, Any] = {"quotas": {"config": {"address_limits": {"max_connections": 0}}}}
# (setup, builder, event, the state expected after it)
WALK: list[tuple[dict[str, Any], Builder, EventOf, State]] = [
    ({}, new, _fixed(Opened(HOST)), State.OPEN),
    (SASL, new, _fixed(Opened(HOST)), State.AUTHENTICATING),
    (LIMITED, new, _fixed(Opened(HOST)), State.CLOSED),
    ({}, new, _fixed(Drain()), State.CLOSED),
    ({}, new, _fixed(Closed("gone")), State.CLOSED),
    (SASL, opened, _sending(HANDSHAKE), State.AUTHENTICATING),
    (SASL, opened, _sending(HANDSHAKE, AUTHENTICATE), State.STEPPING),
    (SASL, opened, _sending(METADATA), State.CLOSED),
    (SASL, authenticating_inflight, _response, State.AUTHENTICATING),
    (SASL, opened, _fixed(TimerFired("throttle")), State.AUTHENTICATING),
    (SASL, opened, _fixed(TimerFired("auth-deadline")), State.CLOSED),
    (SASL, opened, _fixed(Drain()), State.CLOSED),
    (SASL, authenticating_inflight, _fixed(Drain()), State.CLOSING),
    (SASL, opened, _fixed(Closed("gone")), State.CLOSED),
    ({}, opened, _sending(METADATA), State.OPEN),
    ({}, opened, _sending(UNKNOWN_KEY), State.CLOSED),
    (QUOTAS, opened, _sending(ALTER), State.WORKING),
    ({}, open_inflight, _response, State.OPEN),
    ({}, opened, _fixed(TimerFired("throttle")), State.OPEN),
    ({}, opened, _fixed(TimerFired("auth-deadline")), State.OPEN),
    ({}, open_inflight, _fixed(Drain()), State.CLOSING),
    ({}, opened, _fixed(Drain()), State.CLOSED),
    ({}, opened, _fixed(Closed("gone")), State.CLOSED),
    (SASL, stepping, _sending(METADATA), State.STEPPING),
    (SASL, stepping_inflight, _response, State.STEPPING),
    (SASL, stepping, _step, State.OPEN),
    (DELAYING, stepping_delayed, _fixed(TimerFired("login-delay")), State.CLOSED),
    (SASL, stepping, _fixed(TimerFired("auth-deadline")), State.CLOSED),
    (SASL, stepping, _fixed(Drain()), State.STEPPING),
    (SASL, stepping, _fixed(Closed("gone")), State.CLOSED),
    (QUOTAS, working, _sending(METADATA), State.WORKING),
    (QUOTAS, working, _response, State.WORKING),
    (QUOTAS, working, _work, State.OPEN),
    (QUOTAS, working, _fixed(TimerFired("throttle")), State.WORKING),
    (QUOTAS, working, _fixed(Drain()), State.WORKING),
    (QUOTAS, working, _fixed(Closed("gone")), State.CLOSED),
    ({}, closing, _sending(METADATA), State.CLOSING),
    ({}, closing, _response, State.CLOSED),
    ({}, closing, _fixed(TimerFired("throttle")), State.CLOSING),
    ({}, closing, _fixed(Drain()), State.CLOSING),
    ({}, closing, _fixed(Closed("gone")), State.CLOSED),
]


@pytest.mark.parametrize(
    ("setup", "builder", "event_of", "expected"),
    WALK,
    ids=[f"{b.__name__}-{getattr(e, '__name__', '')}-{s.value}" for _, b, e, s in WALK],
)
async def test_a_real_transition_stays_in_the_table(
    setup: dict[str, Any],
    builder: Builder,
    event_of: EventOf,
    expected: State,
    tmp_path: Path,
    make_authorizer: MakeAuthorizer,
) -> None:
    h = await bring(setup, builder, tmp_path, make_authorizer)
    try:
        before = h.connection.state
        assert before.value == builder.__name__.split("_")[0] or builder is opened
        event = await event_of(h)
        commands = h.handle(event)
        after = h.connection.state
        assert after in TABLE[before][type(event)], f"{before} -> {after}"
        assert after is expected, commands
        illegal = [c for c in commands if isinstance(c, cmd.Close) and c.side == "gateway"]
        assert not [c for c in illegal if "transition" in c.reason], illegal
    finally:
        await h.close()


async def test_the_walk_covers_every_listed_pair(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    covered: set[tuple[State, type]] = set()
    for number, (setup, builder, event_of, _) in enumerate(WALK):
        where = tmp_path / str(number)
        where.mkdir()
        h = await bring(setup, builder, where, make_authorizer)
        try:
            covered.add((h.connection.state, type(await event_of(h))))
        finally:
            await h.close()
    listed = {(state, event) for state, row in TABLE.items() for event in row}
    assert listed == covered, listed - covered
