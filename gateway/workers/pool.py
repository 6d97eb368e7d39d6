"""The supervisor's decisions, without I/O: which worker to start, signal or give up on.

``WorkerPool`` is fed events (a worker was started, reported ready, exited; the
operator sent SIGHUP or SIGTERM; time passed) and answers with a list of commands
(``Spawn``, ``Signal``, ``Exit``) that ``supervisor.Supervisor`` carries out.

Restart policy. A worker that dies is started again in the same slot. One that
ran ``stable_s`` or longer restarts at once; one that dies sooner waits
``base_s`` doubling per quick death, up to ``max_s``. A worker that fails to start
(exit code 1 or 2, the gateway's "cannot start") before any worker of the pool was
ever ready means the configuration or the host cannot run a gateway: the pool
stops the others and exits with that code, as a single process would.

Draining. SIGTERM (or SIGINT) goes to every live worker once; nothing is restarted
any more; when the last worker is gone the pool exits 0 (1 if a worker had to be
killed at the deadline, ``drain_timeout_s`` plus a grace period).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Literal

START_FAILURE_CODES = frozenset({1, 2})
KILL_GRACE_S = 15.0


@dataclass(frozen=True, slots=True)
class Spawn:
    slot: int


@dataclass(frozen=True, slots=True)
class Signal:
    pid: int
    signum: int


@dataclass(frozen=True, slots=True)
class Exit:
    code: int


Command = Spawn | Signal | Exit


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    base_s: float = 0.5
    max_s: float = 30.0
    stable_s: float = 10.0

    def delay(self, quick_deaths: int) -> float:
        """The wait before the next start after ``quick_deaths`` deaths in a row (0: none)."""
        if quick_deaths <= 0:
            return 0.0
        return float(min(self.max_s, self.base_s * 2 ** (quick_deaths - 1)))


@dataclass(slots=True)
class Slot:
    """One worker position; its process changes across restarts."""

    index: int
    pid: int | None = None
    started_at: float = 0.0
    ready: bool = False
    quick_deaths: int = 0
    restart_at: float | None = None
    restarts: int = 0


State = Literal["running", "draining", "failed", "done"]


@dataclass(slots=True)
class WorkerPool:
    """N slots, the restart policy, and the pool's state."""

    size: int
    policy: RestartPolicy = RestartPolicy()
    drain_timeout_s: float = 30.0
    slots: list[Slot] = field(default_factory=list)
    state: State = "running"
    ever_ready: bool = False
    exit_code: int = 0
    kill_at: float | None = None

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("a pool needs at least one worker")
        self.slots = [Slot(index) for index in range(self.size)]

    # -- events -------------------------------------------------------------------------

    def start(self) -> list[Command]:
        return [Spawn(slot.index) for slot in self.slots]

    def spawned(self, index: int, pid: int, now: float) -> None:
        slot = self.slots[index]
        slot.pid, slot.started_at, slot.ready, slot.restart_at = pid, now, False, None

    def ready(self, index: int, pid: int) -> None:
        slot = self.slots[index]
        if slot.pid == pid:
            slot.ready = True
            self.ever_ready = True

    def exited(self, pid: int, code: int, now: float) -> list[Command]:
        """A worker process is gone (``code``: its exit code, negative: killed by a signal)."""
        slot = self._slot_of(pid)
        if slot is None:
            return []
        was_ready, ran = slot.ready, now - slot.started_at
        slot.pid, slot.ready = None, False
        if self.state == "running" and not self.ever_ready and code in START_FAILURE_CODES:
            self.state, self.exit_code = "failed", code
            self.kill_at = now + KILL_GRACE_S
            return [*self._signal_all(signal.SIGTERM), *self._finish_if_empty()]
        if self.state != "running":
            return self._finish_if_empty()
        stable = was_ready and ran >= self.policy.stable_s
        slot.quick_deaths = 0 if stable else slot.quick_deaths + 1
        slot.restarts += 1
        delay = self.policy.delay(slot.quick_deaths)
        if delay <= 0:
            return [Spawn(slot.index)]
        slot.restart_at = now + delay
        return []

    def reload(self) -> list[Command]:
        """SIGHUP: every live worker reloads (certificates, CRLs)."""
        if self.state != "running":
            return []
        return self._signal_all(signal.SIGHUP)

    def stop(self, now: float) -> list[Command]:
        """SIGTERM/SIGINT: every worker drains; nothing restarts; exit when all are gone."""
        if self.state != "running":
            return []
        self.state = "draining"
        self.kill_at = now + self.drain_timeout_s + KILL_GRACE_S
        for slot in self.slots:
            slot.restart_at = None
        return [*self._signal_all(signal.SIGTERM), *self._finish_if_empty()]

    def tick(self, now: float) -> list[Command]:
        """Restarts that are due; the drain deadline."""
        if self.state == "running":
            due = [s for s in self.slots if s.restart_at is not None and s.restart_at <= now]
            for slot in due:
                slot.restart_at = None
            return [Spawn(slot.index) for slot in due]
        deadline = self.kill_at
        if self.state != "done" and deadline is not None and now >= deadline and self.live():
            self.kill_at = None
            if self.state == "draining":
                self.exit_code = 1
            return self._signal_all(signal.SIGKILL)
        return self._finish_if_empty()

    # -- views --------------------------------------------------------------------------

    def live(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.pid is not None]

    def all_ready(self) -> bool:
        return self.state == "running" and all(slot.ready for slot in self.slots)

    def restarts(self) -> int:
        return sum(slot.restarts for slot in self.slots)

    # -- helpers ------------------------------------------------------------------------

    def _slot_of(self, pid: int) -> Slot | None:
        return next((slot for slot in self.slots if slot.pid == pid), None)

    def _signal_all(self, signum: int) -> list[Command]:
        return [Signal(slot.pid, signum) for slot in self.slots if slot.pid is not None]

    def _finish_if_empty(self) -> list[Command]:
        if self.state in ("draining", "failed") and not self.live():
            self.state = "done"
            return [Exit(self.exit_code)]
        return []
