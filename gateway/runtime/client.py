"""A tenant's connection: the asyncio side of ``core.Connection``.

Each client connection gets one upstream connection to the broker its listener port
stands for (correlation ids pass through unchanged). Everything the protocol decides
(what to forward, what to answer and when, when to stop reading, when to close) comes
from the core as commands; this module feeds it events and carries the commands out:
writes, timers, the tasks that run a SASL step or local work, and end-to-end flow
control (a full write buffer on one side pauses reading on the other).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from ..core import Connection
from ..core import commands as cmd
from ..core.events import (
    Closed,
    Drain,
    Event,
    Opened,
    RequestFrames,
    StepDone,
    TimerFired,
    WorkDone,
)
from ..identity import ClientIdentity
from ..observability import ConnectionObserver
from ..protocol.framing import FrameError, FrameReader
from ..session import Fault, Side
from .flow import ReadPauses
from .reports import log_authentication, log_lockout
from .upstream import DeferredUpstream, connect_upstream

if TYPE_CHECKING:
    from ..sasl.connection import PendingStep
    from ..slots import PendingWork
    from .gateway import Gateway
    from .listeners import ListenerSet
    from .upstream import UpstreamConnection

log = logging.getLogger("kgw.server")
_ids = itertools.count(1)
LOCAL_WORK_TIMEOUT_S = 15.0  # a store write or topic count the gateway does for a request
# After an answer that explains a close (a refused login): how long the client may take to
# read it before the socket goes. The client's own close ends it sooner. Some clients read
# until the socket would block and drop what they read if the peer's FIN came with it
# (kafka-python 3.0), so closing at once can cost them the error. Kafka's brokers hold a
# failed login's connection too (``connection.failed.authentication.delay.ms``).
CLOSE_LINGER_S = 0.5


class ClientConnection(ReadPauses, asyncio.Protocol):
    """A tenant's connection, paired with one upstream connection."""

    def __init__(self, gateway: Gateway, listener: ListenerSet, node_id: int | None) -> None:
        self.gateway = gateway
        self.listener = listener
        self.node_id = node_id
        self.conn_id = f"c{next(_ids)}"
        self.identity = ClientIdentity(
            listener=listener.config.name, host="", port=0, principal=listener.config.principal
        )
        self.observer = ConnectionObserver(
            gateway.accesslog, gateway.metrics, gateway.instance, self.conn_id, self.identity
        )
        self._observed_close = False
        self.session = gateway.new_session(listener, self.identity, self.observer.active)
        self.core = Connection(self.session, gateway.core_services)
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.reader = FrameReader(gateway.config.limits.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamConnection | None = None
        self.peer = "?"
        self.last_activity = time.monotonic()
        self.closed = False
        self._paused: set[str] = set()
        self._backlog: list[bytes] = []

    def _extra(self, event: str, **more: Any) -> dict[str, Any]:
        return {
            "event": event,
            "conn": self.conn_id,
            "listener": self.listener.config.name,
            "peer": self.peer,
            "node_id": self.node_id,
            **more,
        }

    # -- asyncio callbacks ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.identity.host, self.identity.port = str(peer[0]), int(peer[1])
        transport.set_write_buffer_limits(high=self.gateway.config.limits.write_buffer_high_bytes)
        self.gateway.connections.add(self)
        self._observed(self.observer.opened())
        self.feed(Opened(self.identity.host))
        if self.closed:
            return
        log.debug("client connected", extra=self._extra("client_open"))
        if self.gateway.stopping:
            self.close("gateway is shutting down", "gateway")
            return
        if self.session.auth is not None:  # no broker connection before SASL (decision 0026)
            self.upstream = DeferredUpstream(self)
        else:
            self.pause("connecting")
            self.gateway.spawn(f"connect-{self.conn_id}", connect_upstream(self))

    def data_received(self, data: bytes | memoryview) -> None:  # TLS: a view, copied by the reader
        if self.closed:  # lingering after a refusal: nothing more is read
            return
        self.last_activity = time.monotonic()
        limits = self.gateway.config.limits
        # Until SASL succeeds a frame is capped low, decided from its size prefix alone;
        # once authenticated (KIP-368 re-authentication included) the full limit applies.
        unauthenticated = self.core.authenticating
        self.reader.max_frame = (
            min(limits.max_unauthenticated_request_bytes, limits.max_request_bytes)
            if unauthenticated
            else limits.max_request_bytes
        )
        try:
            frames = self.reader.feed(data)
        except FrameError as exc:
            reason = str(exc)
            if unauthenticated and exc.limit is not None:
                reason = (
                    f"frame of {exc.size} bytes before authentication exceeds the limit of "
                    f"{exc.limit} (limits.max_unauthenticated_request_bytes)"
                )
            self.fail(Fault("client", reason))
            return
        if frames:
            self.feed(RequestFrames(frames))

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "client disconnected" if exc is None else f"connection lost: {exc}"
        self.feed(Closed(reason))
        self.closed = True
        self._observe_close(reason)
        self._cancel_timers()
        self.gateway.forget(self)
        if self.upstream is not None:
            self.upstream.close()
        log.debug("client disconnected", extra=self._extra("client_close"))

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause("client_slow")

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume("client_slow")

    # -- the core: events in, commands out --------------------------------------

    def feed(self, event: Event) -> None:
        """Hand the core one event and carry out what it says, in order."""
        for command in self.core.handle(event):
            self._carry_out(command)

    def _carry_out(self, command: cmd.Command) -> None:
        match command:
            case cmd.Forward(frames):
                if self.upstream is not None:
                    self.upstream.send(frames)
                else:  # still connecting (uvloop may deliver data despite pause_reading)
                    self._backlog.extend(frames)
            case cmd.Reply(frames):
                if self.transport is not None and not self.closed:
                    self.transport.writelines(frames)
                    self.last_activity = time.monotonic()
            case cmd.Record(exchanges):
                for exchange in exchanges:
                    self._observed(self.observer.exchange(exchange))
            case cmd.Pause(reason):
                self.pause(reason)
            case cmd.Resume(reason):
                self.resume(reason)
            case cmd.StartTimer(name, seconds, extend):
                self._start_timer(name, seconds, extend)
            case cmd.RunStep(pending):
                self.gateway.spawn(f"sasl-{self.conn_id}", self._run_step(pending))
            case cmd.RunWork(work):
                self.gateway.spawn(f"work-{self.conn_id}", self._run_work(work))
            case cmd.LoginOutcome(mechanism, step):
                log_authentication(self, mechanism, step)
            case cmd.LockedOut(kind, name, seconds):
                log_lockout(self, kind, name, seconds)
            case cmd.OpenListener(node_id):
                self.gateway.open_broker_listener(node_id)
            case cmd.Close(reason, side, quiet, linger):
                self._shut(reason, side, quiet, linger)

    def _start_timer(self, name: str, seconds: float, extend: bool = False) -> None:
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        previous = self._timers.get(name)
        if previous is not None and extend and previous.when() >= loop.time() + seconds:
            return  # it runs longer already
        previous = self._timers.pop(name, None)
        if previous is not None:
            previous.cancel()
        self._timers[name] = loop.call_later(seconds, self._timer_fired, name)

    def _timer_fired(self, name: str) -> None:
        self._timers.pop(name, None)
        self.feed(TimerFired(name))

    def _cancel_timers(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    async def _run_step(self, pending: PendingStep) -> None:
        """One SASL step, off the event loop's callbacks (the one await of a login)."""
        try:
            step = await pending.mechanism.step(pending.auth_bytes)
        except Exception as exc:  # a mechanism bug must not leave the client hanging
            log.error("SASL mechanism failed", exc_info=exc, extra=self._extra("sasl_error"))
            self.feed(StepDone(None, exc))
            return
        self.feed(StepDone(step))

    async def _run_work(self, work: PendingWork) -> None:
        """Local work for a request (a quota store write, a topic count)."""
        outcome: object
        try:
            outcome = await asyncio.wait_for(work.run(), LOCAL_WORK_TIMEOUT_S)
        except Exception as exc:  # the unit answers it (an error per entry), never a stall
            reason = f"{work.name}: {type(exc).__name__}"
            log.warning(
                "local work failed: %s",
                type(exc).__name__,
                extra=self._extra("local_work_failed", reason=reason),
            )
            outcome = exc
        self.feed(WorkDone(outcome))

    # -- flow control and lifecycle ---------------------------------------------

    def _observed(self, accepted: bool) -> None:
        """The access log wants this connection to wait (``on_full: block``)."""
        if not accepted and "accesslog" not in self._paused and not self.closed:
            self.pause("accesslog")
            self.observer.resume_when_ready(lambda: self.resume("accesslog"))

    def tls_done(self, reason: str | None) -> None:
        """The TLS handshake's outcome, for the access log and metrics (``tls.accept``).

        ``None``: established, called right after ``connection_made``. A reason: refused;
        this connection never reached ``connection_made``, so it is opened and closed
        in the access log here (and never counted by quotas).
        """
        if reason is None:
            self._observed(self.observer.tls("success"))
            return
        self._observed_close = True
        self.observer.opened()
        self.observer.tls("failure", reason)
        self.observer.closed(f"TLS handshake refused: {reason}")

    def _observe_close(self, reason: str) -> None:
        if not self._observed_close:
            self._observed_close = True
            self.observer.closed(reason)

    def begin_drain(self) -> None:
        self.feed(Drain())

    def fail(self, fault: Fault) -> None:
        self.close(fault.reason, fault.side)

    def close(self, reason: str, side: Side, quiet: bool = False) -> None:
        """Close from the network layer's side (a broker gone, a revoked login, idle)."""
        self.feed(Closed(reason))
        self._shut(reason, side, quiet)

    def _shut(self, reason: str, side: Side, quiet: bool = False, linger: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self._observe_close(reason)
        self._cancel_timers()
        if not quiet:
            level = logging.INFO if side == "gateway" else logging.WARNING
            log.log(
                level,
                "connection closed: %s",
                reason,
                extra=self._extra("connection_closed", side=side, reason=reason),
            )
        if self.transport is not None:
            if linger and not self.transport.is_closing():
                self._linger(self.transport)
            else:
                self.transport.close()
        if self.upstream is not None:
            self.upstream.close()
        self.gateway.forget(self)

    def _linger(self, transport: asyncio.Transport) -> None:
        """Close once the client has had time to read the last answer, or when it closes.

        Reading resumes so that the client's close is seen; what it sends is dropped.
        """
        loop = asyncio.get_running_loop()
        self._timers["linger"] = loop.call_later(CLOSE_LINGER_S, transport.close)
        if not transport.is_reading():
            transport.resume_reading()

    def _attach(self, upstream: UpstreamConnection) -> None:
        if self.closed:
            upstream.close()
            return
        self.upstream = upstream
        if self._backlog:
            upstream.send(self._backlog)
            self._backlog = []
        self.resume("connecting")

    def _connect_after_auth(self, frames: list[bytes]) -> None:
        """The first frames for the broker after SASL (``DeferredUpstream``): keep them and
        the ones that follow until the broker connection is attached."""
        self._backlog.extend(frames)
        self.upstream = None
        self.pause("connecting")
