"""``Connection``: one client connection's state machine; events in, commands out.

It owns what used to be decided in the network layer: the order in which held
requests go on after a SASL step or local work, when reading pauses and resumes
(in-flight limit, KIP-219 throttle, running work), the login policy around a SASL
step (``sasl.gate``), connection limits, the authentication deadline, and when the
connection closes. Per-request work is the ``Session``'s; this module asks it and
turns what it has to say into commands. No I/O.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..sasl.base import Step, fail
from ..slots import Fault, Side
from . import commands as cmd
from .events import (
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
from .states import AUTHENTICATING, CLOSED, CLOSING, OPEN, STEPPING, TABLE, WORKING, State

if TYPE_CHECKING:
    from ..quotas import QuotaEngine
    from ..sasl.gate import Admission, LoginGate
    from ..session import Session

log = logging.getLogger("kgw.core")

THROTTLE, AUTH_DEADLINE, LOGIN_DELAY = "throttle", "auth-deadline", "login-delay"


@dataclass(frozen=True, slots=True)
class CoreServices:
    """What the core consults besides the session (shared by every connection)."""

    max_inflight: int = 1000
    auth_timeout_s: float = 0.0  # SASL listeners: close if not authenticated by then
    gate: LoginGate | None = None  # lockouts and blocked tenants around a SASL step
    quotas: QuotaEngine | None = None  # connection limits


class Connection:
    """The sans-IO core of one client connection (``handle`` is its only entry)."""

    def __init__(self, session: Session, services: CoreServices) -> None:
        self.session = session
        self.services = services
        self.state = State.NEW
        self.host = ""
        self._out: list[cmd.Command] = []
        self._held: deque[bytes] = deque()
        self._inflight_paused = False
        self._throttled = False  # KIP-219 mute: nothing more is read or processed
        self._draining = False
        self._admission: Admission | None = None
        self._delayed: Step | None = None  # a judged step waiting out its login delay
        self._tenant: str | None = None  # the tenant counted against connection limits
        self._counted = False  # the connection was admitted by the connection limits

    @property
    def authenticating(self) -> bool:
        """Whether the client has yet to authenticate (its frames are capped lower)."""
        auth = self.session.auth
        return auth is not None and not auth.authenticated

    def handle(self, event: Event) -> list[cmd.Command]:
        """Take one event; return the commands to carry out, in order."""
        before = self.state
        allowed = TABLE[before].get(type(event))
        if allowed is None:
            if before is CLOSED:
                return []
            reason = f"{type(event).__name__} is not expected while {before.value}"
            log.error("connection core: %s", reason, extra={"event": "core_transition"})
            self._close(reason, "gateway")
            return self._take()
        try:
            self._dispatch(event)
        except Fault as fault:
            self._close(fault.reason, fault.side)
        except Exception as exc:  # a bug: this connection closes, never the gateway
            log.error("connection core failed", exc_info=exc, extra={"event": "core_error"})
            self._close(f"internal error: {type(exc).__name__}", "gateway")
        if self.state not in allowed:
            reason = f"{before.value} -> {self.state.value} on {type(event).__name__}"
            log.error("connection core: illegal transition %s", reason,
                      extra={"event": "core_transition"})  # fmt: skip
            self._close(f"illegal transition {reason}", "gateway")
        return self._take()

    def _take(self) -> list[cmd.Command]:
        out, self._out = self._out, []
        return out

    def _dispatch(self, event: Event) -> None:
        match event:
            case Opened(host):
                self._opened(host)
            case RequestFrames(frames):
                self._requests(frames)
            case ResponseFrames(frames):
                for item in frames:
                    self.session.on_response(item)
                self._flush()
            case StepDone(step, error):
                self._step_done(step, error)
            case WorkDone(outcome):
                self._work_done(outcome)
            case TimerFired(name):
                self._timer(name)
            case Drain():
                self._drain()
            case Closed():
                self._closed()

    # -- opening and closing ------------------------------------------------------

    def _opened(self, host: str) -> None:
        self.host = host
        quotas = self.services.quotas
        if quotas is not None:
            refused = quotas.connection_opened(host)
            if refused is not None:  # never counted: closing it frees no place
                self._close(f"connection limit: {refused}", "client")
                return
            self._counted = True
        self._settle()
        if self.session.auth is not None and self.services.auth_timeout_s > 0:
            self._out.append(cmd.StartTimer(AUTH_DEADLINE, self.services.auth_timeout_s))

    def _close(self, reason: str, side: Side, quiet: bool = False, linger: bool = False) -> None:
        if self.state is CLOSED:
            return
        self._record_abandoned()  # before the close record the Close command writes
        self._out.append(cmd.Close(reason, side, quiet, linger))
        self._closed()

    def _closed(self) -> None:
        if self.state is CLOSED:
            return
        self._record_abandoned()
        self.state = CLOSED
        self._held.clear()
        quotas = self.services.quotas
        if quotas is not None and self._counted:
            self._counted = False
            quotas.connection_closed(self.host, self._tenant)

    def _record_abandoned(self) -> None:
        """Every request the client will get no answer to has its record all the same
        (a forwarded one may have been carried out by the broker)."""
        exchanges = self.session.abandon()
        if exchanges:
            self._out.append(cmd.Record(exchanges))

    def _drain(self) -> None:
        self._draining = True
        self._out.append(cmd.Pause("drain"))
        if self.state not in (STEPPING, WORKING):
            self.state = CLOSING
        self._flush()

    def _settle(self) -> None:
        """The state the session is in, once nothing is running."""
        if self.state is CLOSED:
            return
        if self.session.close_after_flush is not None or self._draining:
            self.state = CLOSING
        elif self.authenticating:
            self.state = AUTHENTICATING
        else:
            self.state = OPEN

    # -- requests -----------------------------------------------------------------

    def _requests(self, frames: list[bytes]) -> None:
        if self.state in (STEPPING, WORKING) or self._throttled:
            self._held.extend(frames)  # keep the order: they go on once it is done
            return
        if self.state is CLOSING:
            return  # the connection is closing; nothing more is read
        self._process(frames)

    def _process(self, frames: list[bytes] | deque[bytes]) -> None:
        session = self.session
        forward: list[bytes] = []
        pending = deque(frames)
        while pending and self.state is not CLOSED:
            if self._throttled or session.muted:  # Kafka: a muted channel is not read
                self._held.extend(pending)
                break
            out = session.on_request(pending.popleft())
            if out is not None:
                forward.append(out)
            if session.pending_step is not None or session.pending_work is not None:
                self._held.extend(pending)
                break
        if forward:
            self._out.append(cmd.Forward(forward))
        if session.pending_step is not None:
            self._begin_step()
        elif session.pending_work is not None:
            self.state = WORKING
            self._out.append(cmd.Pause("working"))
            self._out.append(cmd.RunWork(session.pending_work))
        else:
            self._settle()
        self._flush()
        if session.inflight >= self.services.max_inflight and not self._inflight_paused:
            self._inflight_paused = True
            self._out.append(cmd.Pause("inflight"))

    def _release(self, reason: str) -> None:
        """A step or local work is answered: resume reading and go on with held requests."""
        self._settle()
        self._flush()
        if self.state is CLOSED:
            return
        self._out.append(cmd.Resume(reason))
        if self._held and self.state is not CLOSING:
            held, self._held = self._held, deque()
            self._process(held)

    # -- SASL steps ---------------------------------------------------------------

    def _begin_step(self) -> None:
        pending = self.session.pending_step
        assert pending is not None
        self.state = STEPPING
        self._out.append(cmd.Pause("authenticating"))
        gate = self.services.gate
        self._admission = None
        if gate is not None:
            self._admission = gate.admit(self.host, pending.mechanism.name, pending.auth_bytes)
            if self._admission.refusal is not None:  # locked out: the secret is never checked
                self._step_done(self._admission.refusal, None)
                return
        self._out.append(cmd.RunStep(pending))

    def _step_done(self, step: Step | None, error: BaseException | None) -> None:
        pending = self.session.pending_step
        assert pending is not None
        mechanism = pending.mechanism.name
        admission = self._admission
        if step is None:  # the mechanism raised: the client must not hang
            claimed = admission.claimed if admission is not None else None
            step = fail(f"internal error in {mechanism}", claimed)
        delay = 0.0
        gate = self.services.gate
        if gate is not None and admission is not None:
            judged = gate.judge(admission, step)
            step, delay = judged.step, judged.delay_s
            for kind, name, seconds in judged.lockouts:
                self._out.append(cmd.LockedOut(kind, name, seconds))
        auth = self.session.auth
        if auth is not None:  # a re-authentication may not change who this is
            step = auth.screen(step, mechanism)
        if step.done:
            self._out.append(cmd.LoginOutcome(mechanism, step))
        if delay > 0:  # slow down repeated failures; the answer waits
            self._delayed = step
            self._out.append(cmd.StartTimer(LOGIN_DELAY, delay))
            return
        self._finish_step(step)

    def _finish_step(self, step: Step) -> None:
        self.session.complete_step(step)
        quotas = self.services.quotas
        if step.succeeded and quotas is not None and step.tenant and self._tenant is None:
            refused = quotas.connection_identified(step.tenant)
            if refused is not None:
                self._close(f"connection limit: {refused}", "client")
                return
            self._tenant = step.tenant
        self._release("authenticating")

    # -- local work and timers ----------------------------------------------------

    def _work_done(self, outcome: object) -> None:
        out = self.session.complete_work(outcome)
        if out is not None:
            self._out.append(cmd.Forward([out]))
        if self.session.pending_work is not None:  # taken again, and held again
            self._flush()
            self._out.append(cmd.RunWork(self.session.pending_work))
            return
        self._release("working")

    def _timer(self, name: str) -> None:
        if name == THROTTLE:
            self._throttled = False
            self._out.append(cmd.Resume(THROTTLE))
            if self._held and self.state is OPEN:  # what was read before the mute
                held, self._held = self._held, deque()
                self._process(held)
        elif name == AUTH_DEADLINE:
            if self.authenticating:
                timeout = self.services.auth_timeout_s
                reason = f"SASL authentication did not finish within {timeout:g}s"
                self._close(reason, "client")
        elif name == LOGIN_DELAY and self._delayed is not None:
            step, self._delayed = self._delayed, None
            self._finish_step(step)

    # -- what is due --------------------------------------------------------------

    def _flush(self) -> None:
        """Reply with every response that is due, in order; finish a close or drain."""
        session = self.session
        if self.state is CLOSED:
            return
        ready = session.take_ready()
        if ready:
            self._out.append(cmd.Reply(ready))
        if session.finished:
            self._out.append(cmd.Record(session.take_finished()))
        for node_id in session.take_discovered():
            self._out.append(cmd.OpenListener(node_id))
        mute_ms = session.take_mute()
        if mute_ms > 0:  # KIP-219: stop reading the client for the throttle time
            self._throttled = True
            self._out.append(cmd.Pause(THROTTLE))
            # a later, shorter throttle must not end a longer mute early: extend only
            self._out.append(cmd.StartTimer(THROTTLE, mute_ms / 1000, extend=True))
        if self._inflight_paused and session.inflight < self.services.max_inflight:
            self._inflight_paused = False
            self._out.append(cmd.Resume("inflight"))
        if session.inflight == 0 and self.state not in (STEPPING, WORKING):
            if session.close_after_flush is not None:
                self._close(session.close_after_flush, "client", linger=True)
            elif self._draining:
                self._close("drained", "gateway", quiet=True)
