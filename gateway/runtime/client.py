"""A tenant's connection: asyncio callbacks, flow control and lifecycle.

Each client connection gets one upstream connection to the broker its listener
port stands for (correlation ids pass through unchanged); the protocol logic lives
in ``session.Session``. Flow control is end to end: a full write buffer on one
side pauses reading on the other, and too many responses owed to a client
pause reading its requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from ..identity import ClientIdentity
from ..observability import ConnectionObserver
from ..protocol.framing import FrameError, FrameReader
from ..session import Fault, Session, Side
from .steps import run_step, run_work
from .upstream import DeferredUpstream, connect_upstream

if TYPE_CHECKING:
    from .gateway import Gateway
    from .listeners import ListenerSet
    from .upstream import UpstreamConnection

log = logging.getLogger("kgw.server")
_ids = itertools.count(1)


class ClientConnection(asyncio.Protocol):
    """A tenant's connection, paired with one upstream connection."""

    def __init__(self, gateway: Gateway, listener: ListenerSet, node_id: int | None) -> None:
        self.gateway = gateway
        self.listener = listener
        self.node_id = node_id
        self.conn_id = f"c{next(_ids)}"
        self.identity = ClientIdentity(
            listener=listener.config.name, host="", port=0, principal=listener.config.principal
        )
        enforcer = None
        if gateway.policy is not None:
            from ..enforcement import Enforcer

            # checks off (gateway.authorizer None): the brokers decide, except on the APIs
            # the gateway answers from its own stores, which no broker ever sees
            brokers_decide = gateway.authorizer is None
            enforcer = Enforcer(gateway.policy, self.identity, brokers_decide=brokers_decide)
        auth = None
        if listener.config.authentication == "sasl" and gateway.sasl_server is not None:
            from ..sasl.connection import Authentication

            auth = Authentication(
                gateway.sasl_server,
                self.identity,
                gateway.config.sasl.session_lifetime_s if gateway.config.sasl else 0,
                keep_certificate_principal=listener.config.principal_from == "certificate",
            )
        self.observer = ConnectionObserver(
            gateway.accesslog, gateway.metrics, gateway.instance, self.conn_id, self.identity
        )
        self._observed_close = False
        throttle = admin = None
        if gateway.quotas is not None:
            from ..quotas.admin import QuotaAdmin
            from ..quotas.throttle import Throttle

            throttle = Throttle(gateway.quotas, self.identity)
            topics = gateway.cluster_topics
            assert topics is not None
            admin = QuotaAdmin(gateway.quotas, self.identity, topics.fetch, topics.note)
        self.session = Session(
            listener.public,
            self.identity,
            enforcer,
            auth,
            observe=self.observer.active,
            throttle=throttle,
            admin=admin,
            # tenants share broker ports: fetch sessions stay with their connection,
            # also when only the brokers decide (authorization.gateway_checks: false)
            bind_fetch_sessions=gateway.policy is not None,
        )
        self._mute_handle: asyncio.TimerHandle | None = None
        self._counted_tenant: str | None = None
        self.reader = FrameReader(gateway.config.limits.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamConnection | None = None
        self.peer = "?"
        self.last_activity = time.monotonic()
        self.closed = False
        self.draining = False
        self._paused: set[str] = set()
        self._backlog: list[bytes] = []
        self._held: list[bytes] = []

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
        quotas = self.gateway.quotas
        if quotas is not None:
            refused = quotas.connection_opened(self.identity.host)
            if refused is not None:
                self.close(f"connection limit: {refused}", "client")
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
        sasl = self.gateway.config.sasl
        if self.session.auth is not None and sasl is not None:
            asyncio.get_running_loop().call_later(sasl.auth_timeout_s, self._auth_deadline)

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        limits = self.gateway.config.limits
        auth = self.session.auth
        # Until SASL succeeds a frame is capped low, decided from its size prefix alone;
        # once authenticated (KIP-368 re-authentication included) the full limit applies.
        unauthenticated = auth is not None and not auth.authenticated
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
        session = self.session
        if self._held or session.pending_step is not None or session.pending_work is not None:
            self._held.extend(frames)  # a SASL step or local work is running: keep the order
            return
        self._process(frames)

    def _process(self, frames: list[bytes]) -> None:
        forward = []
        try:
            for index, item in enumerate(frames):
                out = self.session.on_request(item)
                if out is not None:
                    forward.append(out)
                if self.session.pending_step is not None:
                    self._held.extend(frames[index + 1 :])
                    self.pause("authenticating")
                    self.gateway.spawn(f"sasl-{self.conn_id}", run_step(self))
                    break
                if self.session.pending_work is not None:
                    self._held.extend(frames[index + 1 :])
                    self.pause("working")
                    self.gateway.spawn(f"work-{self.conn_id}", run_work(self))
                    break
        except Fault as fault:
            self.fail(fault)
            return
        if forward:
            if self.upstream is not None:
                self.upstream.send(forward)
            else:  # still connecting (uvloop may deliver data despite pause_reading)
                self._backlog.extend(forward)
        self.flush()
        if self.session.inflight >= self.gateway.config.limits.max_inflight_requests:
            self.pause("inflight")

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
            if self.gateway.quotas is not None and self.identity.host:
                self.gateway.quotas.connection_closed(self.identity.host, self._counted_tenant)

    def _auth_deadline(self) -> None:
        auth = self.session.auth
        if auth is not None and not auth.authenticated and not self.closed:
            timeout = self.gateway.config.sasl.auth_timeout_s if self.gateway.config.sasl else 0
            self.close(f"SASL authentication did not finish within {timeout:g}s", "client")

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._observe_close("client disconnected" if exc is None else f"connection lost: {exc}")
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

    # -- flow control and lifecycle ---------------------------------------------

    def pause(self, reason: str) -> None:
        self._paused.add(reason)
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume(self, reason: str) -> None:
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def _apply_mute(self) -> None:
        """KIP-219: after a throttled response, stop reading the client for the throttle."""
        ms = self.session.take_mute()
        if ms <= 0 or self.closed:
            return
        self.pause("throttle")
        if self._mute_handle is not None:
            self._mute_handle.cancel()
        loop = asyncio.get_running_loop()
        self._mute_handle = loop.call_later(ms / 1000, self.resume, "throttle")

    def flush(self) -> None:
        """Write every response that is due, in order; finish a close or drain."""
        ready = self.session.take_ready()
        if ready and self.transport is not None and not self.closed:
            self.transport.writelines(ready)
            self.last_activity = time.monotonic()
        if self.session.finished:
            for exchange in self.session.take_finished():
                self._observed(self.observer.exchange(exchange))
        if self.session.throttle is not None:
            self._apply_mute()
        if "inflight" in self._paused and (
            self.session.inflight < self.gateway.config.limits.max_inflight_requests
        ):
            self.resume("inflight")
        if self.session.inflight == 0:
            if self.session.close_after_flush is not None:
                self.close(self.session.close_after_flush, "client")
            elif self.draining:
                self.close("drained", "gateway", quiet=True)

    def begin_drain(self) -> None:
        self.draining = True
        self.pause("drain")
        self.flush()

    def fail(self, fault: Fault) -> None:
        self.close(fault.reason, fault.side)

    def close(self, reason: str, side: Side, quiet: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self._observe_close(reason)
        if not quiet:
            level = logging.INFO if side == "gateway" else logging.WARNING
            log.log(
                level,
                "connection closed: %s",
                reason,
                extra=self._extra("connection_closed", side=side, reason=reason),
            )
        if self.transport is not None:
            self.transport.close()
        if self.upstream is not None:
            self.upstream.close()
        self.gateway.forget(self)

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
