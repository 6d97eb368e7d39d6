"""The states of a client connection and the events each one accepts (h11 style).

``TABLE[state][event type]`` is the set of states the connection may be in after
handling that event; an event a state does not list is a bug in the caller and
closes the connection (``CLOSED`` takes every event and ignores it). The core checks
every transition against this table, and tests/unit/core/test_states.py walks it.

    state           reads requests?  what it waits for
    NEW             no               Opened
    AUTHENTICATING  yes (SASL only)  a SaslHandshake/SaslAuthenticate
    OPEN            yes              requests and responses
    STEPPING        held in order    StepDone (then the login-delay timer, if any)
    WORKING         held in order    WorkDone
    CLOSING         dropped          the responses still owed, then Close
    CLOSED          dropped          nothing
"""

from __future__ import annotations

from ..enums import HotEnum
from .events import (
    Closed,
    Drain,
    Opened,
    RequestFrames,
    ResponseFrames,
    StepDone,
    TimerFired,
    WorkDone,
)


class State(HotEnum):
    NEW = "new"
    AUTHENTICATING = "authenticating"
    OPEN = "open"
    STEPPING = "stepping"
    WORKING = "working"
    CLOSING = "closing"
    CLOSED = "closed"


NEW, AUTHENTICATING, OPEN = State.NEW, State.AUTHENTICATING, State.OPEN
STEPPING, WORKING, CLOSING, CLOSED = State.STEPPING, State.WORKING, State.CLOSING, State.CLOSED

# Where handling held requests can lead once a step or local work is done.
_RELEASED = frozenset({AUTHENTICATING, OPEN, STEPPING, WORKING, CLOSING, CLOSED})

TABLE: dict[State, dict[type, frozenset[State]]] = {
    NEW: {
        Opened: frozenset({AUTHENTICATING, OPEN, CLOSED}),
        Drain: frozenset({CLOSED}),
        Closed: frozenset({CLOSED}),
    },
    AUTHENTICATING: {
        RequestFrames: frozenset({AUTHENTICATING, STEPPING, CLOSING, CLOSED}),
        ResponseFrames: frozenset({AUTHENTICATING, CLOSED}),  # ApiVersions before SASL
        TimerFired: frozenset({AUTHENTICATING, CLOSED}),  # throttle; the auth deadline
        Drain: frozenset({CLOSING, CLOSED}),
        Closed: frozenset({CLOSED}),
    },
    OPEN: {
        RequestFrames: frozenset({OPEN, STEPPING, WORKING, CLOSING, CLOSED}),
        ResponseFrames: frozenset({OPEN, CLOSED}),
        TimerFired: frozenset({OPEN}),
        Drain: frozenset({CLOSING, CLOSED}),
        Closed: frozenset({CLOSED}),
    },
    STEPPING: {
        RequestFrames: frozenset({STEPPING}),  # held until the step is answered
        ResponseFrames: frozenset({STEPPING, CLOSED}),
        StepDone: _RELEASED,  # STEPPING again: a login delay, or the next held step
        TimerFired: _RELEASED,  # the login delay ended (or the auth deadline closed)
        Drain: frozenset({STEPPING}),  # closes once the step is answered
        Closed: frozenset({CLOSED}),
    },
    WORKING: {
        RequestFrames: frozenset({WORKING}),  # held until the work is done
        ResponseFrames: frozenset({WORKING, CLOSED}),
        WorkDone: _RELEASED,
        TimerFired: frozenset({WORKING}),
        Drain: frozenset({WORKING}),
        Closed: frozenset({CLOSED}),
    },
    CLOSING: {
        RequestFrames: frozenset({CLOSING}),  # dropped: the connection is closing
        ResponseFrames: frozenset({CLOSING, CLOSED}),
        TimerFired: frozenset({CLOSING, CLOSED}),
        Drain: frozenset({CLOSING, CLOSED}),
        Closed: frozenset({CLOSED}),
    },
    CLOSED: {},  # every event is ignored
}
