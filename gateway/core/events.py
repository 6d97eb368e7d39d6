"""What the network layer tells the connection core. Every event is a frozen value."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.framing import Frame
from ..sasl.base import Step


@dataclass(frozen=True, slots=True)
class Opened:
    """The client connected (after TLS, when there is TLS) from ``host``."""

    host: str


@dataclass(frozen=True, slots=True)
class RequestFrames:
    """Whole request frames from the client, size prefix included, in arrival order."""

    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class ResponseFrames:
    """Whole response frames from the broker, size prefix included, in arrival order."""

    frames: list[Frame]


@dataclass(frozen=True, slots=True)
class StepDone:
    """The SASL step of ``RunStep`` ran: its answer, or the exception the mechanism raised."""

    step: Step | None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class WorkDone:
    """The local work of ``RunWork`` ran: its result, or the exception it raised."""

    outcome: object


@dataclass(frozen=True, slots=True)
class TimerFired:
    """The timer ``StartTimer(name)`` asked for is due."""

    name: str


@dataclass(frozen=True, slots=True)
class Drain:
    """The gateway is stopping: answer what is owed, take nothing new, then close."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection is gone (either side closed it, or a ``Close`` was carried out)."""

    reason: str


Event = Opened | RequestFrames | ResponseFrames | StepDone | WorkDone | TimerFired | Drain | Closed
