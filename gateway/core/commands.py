"""What the connection core asks the network layer to do. Every command is a frozen value.

The network layer carries them out in list order and reports back with an event
where a command says so (``RunStep`` → ``StepDone``, ``RunWork`` → ``WorkDone``,
``StartTimer`` → ``TimerFired``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.framing import Frame
from ..slots import Side

if TYPE_CHECKING:
    from ..accesslog.exchange import Exchange
    from ..sasl.base import Step
    from ..sasl.connection import PendingStep
    from ..slots import PendingWork


@dataclass(frozen=True, slots=True)
class Forward:
    """Send these request frames to the broker, in order."""

    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class Reply:
    """Write these response frames to the client, in order."""

    frames: list[Frame]


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run the SASL mechanism's step on the client's bytes; report ``StepDone``."""

    pending: PendingStep


@dataclass(frozen=True, slots=True)
class RunWork:
    """Run the deferred local work (a store write, a topic count); report ``WorkDone``."""

    work: PendingWork


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop reading the client for ``reason`` (reading resumes once no reason is left)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Resume:
    """``reason`` no longer holds reading back."""

    reason: str


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Report ``TimerFired(name)`` after ``seconds``; a timer of the same name is replaced,
    but with ``extend`` only by a later one (a throttle is never cut short)."""

    name: str
    seconds: float
    extend: bool = False


@dataclass(frozen=True, slots=True)
class Record:
    """These exchanges are finished: write them to the access log."""

    exchanges: list[Exchange]


@dataclass(frozen=True, slots=True)
class LoginOutcome:
    """A SASL exchange ended: log it, count it, record it (never the secret)."""

    mechanism: str
    step: Step


@dataclass(frozen=True, slots=True)
class LockedOut:
    """Repeated failures locked a key out: ``kind`` "host" or "principal"."""

    kind: str
    name: str
    seconds: float


@dataclass(frozen=True, slots=True)
class OpenListener:
    """A broker appeared in a response: give node ``node_id`` its public listener."""

    node_id: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close both sides: ``side`` says whose fault it was; ``quiet``: no log line.

    ``linger``: the last thing written is the answer that explains the close (a refused
    login or handshake); the client is given a moment to read it before the socket goes.
    """

    reason: str
    side: Side
    quiet: bool = False
    linger: bool = False


Command = (
    Forward | Reply | RunStep | RunWork | Pause | Resume | StartTimer | Record | LoginOutcome
    | LockedOut | OpenListener | Close
)  # fmt: skip
