"""The asyncio network layer: listeners, client and upstream connections.

This is the only module that does I/O on the data path. Each client
connection gets one upstream connection to the broker its listener port
stands for (correlation ids pass through unchanged); the protocol logic lives
in ``session.Session``. Flow control is end to end: a full write buffer on one
side pauses reading on the other, and too many responses owed to a client
pause reading its requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal, cast

from .accesslog import AccessLog, build_access_log
from .accesslog.records import default_instance
from .config import GatewayConfig, ListenerConfig
from .identity import ClientIdentity
from .observability import ConnectionObserver, GatewayMetrics, ObservabilityServer
from .observability import serve as serve_observability
from .protocol.apis import API_VERSIONS
from .protocol.codec import peek_request
from .protocol.framing import FrameError, FrameReader
from .sasl.revalidate import Revalidation, SessionKey, session_key
from .session import Fault, Session, Side
from .tls.accept import TlsAcceptor
from .tls.reloader import Reloadable
from .tls.sni import SniPublicMap
from .tls.upstream import upstream_context
from .topology import PublicMap, Topology
from .upstream.api_versions_cache import ApiVersionsCache
from .upstream.identity import UpstreamIdentity
from .upstream.provision import AdminUnavailable, TenantLogin
from .upstream.scram_client import UpstreamAuthError

if TYPE_CHECKING:
    from .authz.engine import Authorizer
    from .quotas import QuotaEngine
    from .quotas.cluster_view import ClusterTopics
    from .sasl import FailureLimiter, SaslServer, Step
    from .tenants import TenantWatch
    from .upstream.handshake import UpstreamHandshake

log = logging.getLogger("kgw.server")
UpstreamLogin = UpstreamIdentity | TenantLogin


class UpstreamRefused(Exception):
    """This client connection may not reach the brokers under any identity."""


_ids = itertools.count(1)
LOCAL_WORK_TIMEOUT_S = 15.0  # a store write or topic count the gateway does for a request


class ListenerSet:
    """One configured listener: its bootstrap port and a port per known broker."""

    def __init__(self, gateway: Gateway, config: ListenerConfig) -> None:
        self.gateway = gateway
        self.config = config
        self.public = (
            PublicMap(config, gateway.topology)
            if config.sni is None
            else SniPublicMap(config, gateway.topology, config.sni)
        )
        self.tls = (  # loads the TLS material: MaterialError stops the start
            TlsAcceptor(config.name, config.tls, config.sni, config.advertised_host)
            if config.tls is not None
            else None
        )
        self.servers: dict[int | None, asyncio.Server] = {}
        self._opening: set[int] = set()

    def bind_port(self, node_id: int | None) -> int:
        if node_id is None or self.config.broker_port_base is None:
            return self.config.bootstrap_port
        return self.config.broker_port_base + node_id

    def _protocol(self, node_id: int | None) -> asyncio.Protocol:
        conn = ClientConnection(self.gateway, self, node_id)
        return conn if self.tls is None else self.tls.protocol(conn)

    async def open(self, node_id: int | None) -> None:
        port = self.bind_port(node_id)
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(
                lambda: self._protocol(node_id),
                self.config.bind_host,
                port,
                reuse_address=True,
                backlog=1024,
            )
        except OSError as exc:
            log.error(
                "cannot listen: %s",
                exc.strerror,
                extra={"event": "listen_failed", "listener": self.config.name, "port": port},
            )
            if node_id is None:
                raise
            return
        finally:
            if node_id is not None:
                self._opening.discard(node_id)
        self.servers[node_id] = server
        log.info(
            "listening",
            extra={
                "event": "listening",
                "listener": self.config.name,
                "host": self.config.bind_host,
                "port": port,
                "node_id": node_id,
            },
        )

    def ensure_broker(self, node_id: int) -> None:
        if node_id in self.servers or node_id in self._opening or self.config.sni is not None:
            return
        if node_id > self.config.max_node_id:
            log.error(
                "broker node id has no public port",
                extra={
                    "event": "unmappable_broker",
                    "listener": self.config.name,
                    "node_id": node_id,
                },
            )
            return
        self._opening.add(node_id)
        self.gateway.spawn(f"listen-{self.config.name}-{node_id}", self.open(node_id))

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


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
            from .enforcement import Enforcer

            # checks off (gateway.authorizer None): the brokers decide, except on the APIs
            # the gateway answers from its own stores, which no broker ever sees
            brokers_decide = gateway.authorizer is None
            enforcer = Enforcer(gateway.policy, self.identity, brokers_decide=brokers_decide)
        auth = None
        if listener.config.authentication == "sasl" and gateway.sasl_server is not None:
            from .authentication import Authentication

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
            from .enforcement.quota_admin import QuotaAdmin
            from .throttling import Throttle

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
            self.gateway.spawn(f"connect-{self.conn_id}", self._connect_upstream())
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
                    self.gateway.spawn(f"sasl-{self.conn_id}", self._run_step())
                    break
                if self.session.pending_work is not None:
                    self._held.extend(frames[index + 1 :])
                    self.pause("working")
                    self.gateway.spawn(f"work-{self.conn_id}", self._run_work())
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

    async def _run_work(self) -> None:
        """Run the session's pending local work (a quota store write, a topic count), then
        answer or forward that request in its place and go on with the held ones."""
        work = self.session.pending_work
        assert work is not None
        outcome: object
        try:
            outcome = await asyncio.wait_for(work.run(), LOCAL_WORK_TIMEOUT_S)
        except Exception as exc:  # the unit answers it (an error per entry), never a stall
            log.warning(
                "local work failed: %s",
                type(exc).__name__,
                extra=self._extra("local_work_failed", reason=f"{work.name}: {type(exc).__name__}"),
            )
            outcome = exc
        if self.closed:
            return
        try:
            out = self.session.complete_work(outcome)
        except Fault as fault:
            self.fail(fault)
            return
        if out is not None:
            if self.upstream is not None:
                self.upstream.send([out])
            else:
                self._backlog.append(out)
        self.flush()
        held, self._held = self._held, []
        self.resume("working")
        if held and not self.closed:
            self._process(held)

    async def _run_step(self) -> None:
        """Run one SASL step off the session; refuse locked-out keys without checking the
        secret, slow down repeated failures."""
        from .sasl.base import LOCKED_OUT, fail
        from .sasl.claims import claimed_name
        from .sasl.limiter import address_key, principal_key

        pending = self.session.pending_step
        assert pending is not None
        mechanism = pending.mechanism.name
        limiter = self.gateway.auth_limiter
        claimed = claimed_name(mechanism, pending.auth_bytes)
        keys = [address_key(self.identity.host)]
        if claimed:
            keys.append(principal_key(claimed))
        locked = limiter is not None and limiter.locked_out(*keys)
        if locked:
            step = fail("locked_out", claimed, LOCKED_OUT)
        else:
            try:
                step = await pending.mechanism.step(pending.auth_bytes)
            except Exception as exc:  # a mechanism bug must not leave the client hanging
                log.error("SASL mechanism failed", exc_info=exc, extra=self._extra("sasl_error"))
                step = fail(f"internal error in {mechanism}", claimed)
        tenants = self.gateway.tenants
        if step.succeeded and tenants is not None and tenants.blocked(step.tenant):
            step = fail("tenant_blocked", step.claimed or step.principal)  # suspended or deleted
        if self.closed:
            return
        if step.done:
            self._log_authentication(mechanism, step)
            if not step.succeeded and limiter is not None:
                if step.claimed and principal_key(step.claimed) not in keys:
                    keys.append(principal_key(step.claimed))
                delay, newly_locked = limiter.failed(*keys, refused=locked)
                for key in newly_locked:  # "addr:<host>" or "principal:<claimed, clipped>"
                    kind, _, name = key.partition(":")
                    who = {"host": name} if kind == "addr" else {"principal": name}
                    log.warning(
                        "SASL lockout after repeated failures",
                        extra=self._extra(
                            "sasl_lockout", reason=kind, seconds=limiter.lockout_s, **who
                        ),
                    )
                if delay > 0:
                    await asyncio.sleep(delay)
                if self.closed:
                    return
        self.session.complete_step(step)
        quotas = self.gateway.quotas
        if step.succeeded and quotas is not None and step.tenant and self._counted_tenant is None:
            refused = quotas.connection_identified(step.tenant)
            if refused is not None:
                self.close(f"connection limit: {refused}", "client")
                return
            self._counted_tenant = step.tenant
        self.flush()
        held, self._held = self._held, []
        self.resume("authenticating")
        if held and not self.closed:
            self._process(held)

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

    def _log_authentication(self, mechanism: str, step: Step) -> None:
        """The ``authentication`` log line, metric and access-log ``auth`` record; a
        failure's record names the identity the client claimed (never the secret)."""
        from .accesslog.records import auth_failure_record

        outcome: Literal["success", "failure"] = "success" if step.succeeded else "failure"
        if step.succeeded:
            self.observer.auth(outcome, step.reason)
        else:
            observer = self.observer
            if observer.access_log is not None:
                observer.access_log.record(
                    auth_failure_record(
                        observer.instance,
                        self.conn_id,
                        self.identity,
                        mechanism=mechanism,
                        claimed=step.claimed,
                        reason=step.reason,
                    )
                )
            if self.gateway.metrics is not None:
                self.gateway.metrics.auth_failed(self.listener.config.name, mechanism)
        log.log(
            logging.INFO if step.succeeded else logging.WARNING,
            "SASL authentication %s",
            outcome,
            extra=self._extra(
                "authentication",
                outcome=outcome,
                mechanism=mechanism,
                principal=step.principal or step.claimed,
                reason=step.reason,
            ),
        )

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

    async def _connect_upstream(self) -> None:
        """Connect to the broker, retrying with backoff for up to ``connect_timeout_s``.

        A broker that refuses (killed, restarting) keeps the client waiting rather
        than accepted-then-closed at once, which some clients (kafka-python) take as
        a successful connect and retry without backoff.
        """
        loop = asyncio.get_running_loop()
        timeout = self.gateway.config.upstream.connect_timeout_s
        deadline = loop.time() + timeout
        delay, attempts, last_error = 0.1, 0, "the broker is not in the cluster"
        login = await self._upstream_login(force=False)
        if login is False:
            return
        retries = 0  # a tenant login refused: its credential may not have reached this broker
        while not self.closed:
            for host, port in self.gateway.upstream_candidates(self.node_id):
                attempts += 1
                remaining = max(0.1, deadline - loop.time())
                try:
                    upstream, error = await self._try_upstream(host, port, remaining, login)
                except UpstreamAuthError as exc:
                    if isinstance(login, TenantLogin) and retries < 3 and not self.closed:
                        retries += 1
                        await asyncio.sleep(0.25 * retries)
                        login = await self._upstream_login(force=True)
                        if login is False:
                            return
                        continue
                    self._upstream_auth_failed(host, port, str(exc), login)
                    return
                if upstream is not None:
                    self._attach(upstream)
                    return
                last_error = error
                if self.closed:
                    return
            if loop.time() + delay >= deadline:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        if self.closed:
            return
        log.warning(
            "upstream connect failed",
            extra=self._extra("upstream_connect_failed", reason=last_error, count=attempts),
        )
        if self.gateway.metrics is not None:
            self.gateway.metrics.upstream_error("connect")
        self.close(f"no broker reachable within {timeout:g}s ({last_error})", "upstream")

    async def _upstream_login(self, force: bool) -> UpstreamLogin | Literal[False] | None:
        """Who this connection is to the brokers; ``False`` (and closed) if no one."""
        try:
            return await self.gateway.upstream_login(self.identity, force)
        except UpstreamRefused as exc:
            log.warning(
                "no upstream identity: %s",
                exc,
                extra=self._extra("upstream_identity_refused", principal=self.identity.principal),
            )
            self.close(str(exc), "gateway")
        except AdminUnavailable as exc:
            log.warning(
                "tenant upstream identity not provisioned: %s",
                exc,
                extra=self._extra("upstream_provision_failed", principal=self.identity.principal),
            )
            if self.gateway.metrics is not None:
                self.gateway.metrics.upstream_error("connect")
            self.close("the gateway could not provision the tenant's broker identity", "upstream")
        return False

    async def _try_upstream(
        self, host: str, port: int, timeout_s: float, identity: UpstreamLogin | None
    ) -> tuple[UpstreamConnection | None, str]:
        """Connect (and authenticate, with ``upstream.sasl``); ``UpstreamAuthError`` if refused."""
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await asyncio.wait_for(
                loop.create_connection(
                    lambda: UpstreamConnection(
                        self, identity.handshake() if identity is not None else None
                    ),
                    host,
                    port,
                    **self.gateway.upstream_tls(),
                ),
                timeout_s,
            )
        except TimeoutError:
            return None, f"{host}:{port}: connect timed out after {timeout_s:.1f}s"
        except OSError as exc:
            return None, f"{host}:{port}: {exc.strerror or str(exc) or type(exc).__name__}"
        if identity is not None:
            limit = identity.timeout_s
            try:
                await asyncio.wait_for(asyncio.shield(upstream.ready), limit)
            except TimeoutError:
                upstream.close()
                raise UpstreamAuthError(
                    f"no SASL answer from the broker within {limit:g}s"
                ) from None
            except UpstreamAuthError:
                upstream.close()
                raise
        return upstream, ""

    def _upstream_auth_failed(
        self, host: str, port: int, reason: str, identity: UpstreamLogin | None
    ) -> None:
        """The broker refused the gateway's own credentials: log it (no secret), close."""
        log.warning(
            "upstream SASL authentication failed: %s",
            reason,
            extra=self._extra(
                "upstream_auth_failed",
                upstream=f"{host}:{port}",
                mechanism=identity.mechanism if identity is not None else None,
                principal=identity.username if identity is not None else None,
                reason=reason,
            ),
        )
        if self.gateway.metrics is not None:
            self.gateway.metrics.upstream_error("auth")
        self.close("the gateway could not authenticate to the broker", "upstream")

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


class UpstreamConnection(asyncio.Protocol):
    """The gateway's connection to one broker on behalf of one client connection."""

    def __init__(self, client: ClientConnection, login: UpstreamHandshake | None = None) -> None:
        self.client = client
        self.reader = FrameReader(client.gateway.config.limits.max_response_bytes)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._paused: set[str] = set()
        self._login = login  # the gateway's own SASL exchange; None once done (or none)
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if login is None:
            self.ready.set_result(None)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        transport.set_write_buffer_limits(
            high=self.client.gateway.config.limits.write_buffer_high_bytes
        )
        if self._login is not None:  # after TLS, before any client frame
            transport.write(self._login.start())

    def _login_received(self, data: bytes) -> None:
        """A broker answer during the gateway's own SASL exchange."""
        login = self._login
        assert login is not None and self.transport is not None
        try:
            for item in self.reader.feed(data):
                if login.done:
                    raise UpstreamAuthError("unexpected response after SASL authentication")
                reply = login.on_frame(item)
                if reply is not None:
                    self.transport.write(reply)
        except (FrameError, UpstreamAuthError) as exc:
            self._login_failed(UpstreamAuthError(str(exc)))
            return
        if login.done:
            self._login = None
            if not self.ready.done():
                self.ready.set_result(None)

    def _login_failed(self, error: UpstreamAuthError) -> None:
        self._login = None
        if not self.ready.done():
            self.ready.set_exception(error)
            self.ready.exception()  # retrieved: the connecting task may have given up already
        self.close()

    def send(self, frames: list[bytes]) -> None:
        if self.transport is not None and not self.closed:
            self.transport.writelines(frames)

    def data_received(self, data: bytes) -> None:
        if self._login is not None:
            self._login_received(data)
            return
        client = self.client
        try:
            for item in self.reader.feed(data):
                client.session.on_response(item)
        except FrameError as exc:
            client.fail(Fault("upstream", str(exc)))
            return
        except Fault as fault:
            client.fail(fault)
            return
        client.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.ready.done():  # during the gateway's own SASL login: the connector reports
            self._login = None
            self.ready.set_exception(
                UpstreamAuthError("the broker closed the connection during SASL authentication")
            )
            self.ready.exception()
            return
        if self.client.upstream is not self:  # never attached: its connector reports
            return
        if not self.client.closed:
            if self.client.gateway.metrics is not None:
                self.client.gateway.metrics.upstream_error("closed")
            reason = (
                f"broker closed the connection ({exc})" if exc else "broker closed the connection"
            )
            self.client.close(reason, "upstream")

    def pause_writing(self) -> None:
        self.client.pause("upstream_slow")

    def resume_writing(self) -> None:
        self.client.resume("upstream_slow")

    def pause(self, reason: str) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()


class DeferredUpstream(UpstreamConnection):
    """Stands in for the broker connection of a SASL client until it has authenticated.

    ApiVersions is answered from the cluster's cached answer (``Gateway.api_versions``),
    through the session as a forwarded answer would be; the first other frame (the
    session lets none through before SASL succeeded) opens the real connection, as the
    client's upstream identity, once every ApiVersions answer owed has been given.
    """

    def __init__(self, client: ClientConnection) -> None:
        super().__init__(client)
        self._owed: list[bytes] = []
        self._worker: asyncio.Task[None] | None = None
        self._switched = False

    def send(self, frames: list[bytes]) -> None:
        for index, item in enumerate(frames):
            if self._switched or peek_request(memoryview(item)[4:])[0] != API_VERSIONS:
                if not self._switched:
                    self._switched = True
                    self.client._connect_after_auth(frames[index:])
                break
            self._owed.append(item)
        if self._worker is None and not self.closed:
            name = f"api-versions-{self.client.conn_id}"
            self._worker = self.client.gateway.spawn(name, self._answer())

    async def _answer(self) -> None:
        client = self.client
        try:
            while self._owed and not self.closed:
                try:
                    reply = await client.gateway.api_versions.answer(self._owed.pop(0))
                except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
                    reason = str(exc) or type(exc).__name__
                    client.close(f"no broker answered ApiVersions ({reason})", "upstream")
                    return
                if self.closed:
                    return
                self.data_received(reply)  # through the session: intersected, in order
        finally:
            self._worker = None
        if self._switched and not self.closed and not client.closed:
            client.gateway.spawn(f"connect-{client.conn_id}", client._connect_upstream())

    def close(self) -> None:
        self.closed = True


class Gateway:
    """All listeners, the shared topology, and the background tasks."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.topology = Topology(on_new_broker=self._on_new_broker)
        self.sasl_server: SaslServer | None = None
        self.auth_limiter: FailureLimiter | None = None
        if config.sasl is not None:
            from .sasl import SaslServer

            self.sasl_server = SaslServer.from_config(config.sasl)
            self.auth_limiter = self.sasl_server.limiter
        self.accesslog: AccessLog | None = None
        self.metrics: GatewayMetrics | None = None
        self.metrics_server: ObservabilityServer | None = None
        self.instance = default_instance()
        if config.accesslog is not None:
            self.accesslog = build_access_log(
                config.accesslog,
                bootstrap=lambda: self.upstream_candidates(None),
                connect_kwargs=self.upstream_tls,
            )
            self.instance = config.accesslog.instance or self.instance
        if config.metrics is not None and config.metrics.enabled:
            self.metrics = GatewayMetrics(max_tenants=config.metrics.max_tenants)
            if self.accesslog is not None:
                self.metrics.watch_access_log(self.accesslog.stats)
        self.quotas: QuotaEngine | None = None
        self.cluster_topics: ClusterTopics | None = None
        if config.quotas is not None:
            from .quotas import QuotaEngine

            self.quotas = QuotaEngine.from_config(config.quotas)
            self._watch_quotas(self.quotas)
        self.authorizer: Authorizer | None = None  # None: sessions get no Enforcer
        self.policy: Authorizer | None = None  # the policy, for the gateway or the brokers
        if config.authorization is not None:
            from .authz.engine import Authorizer

            self.policy = Authorizer.from_config(config.authorization)
            if config.authorization.gateway_checks:
                self.authorizer = self.policy
        self.tenants: TenantWatch | None = None  # suspended/deleted tenants (gateway/tenants)
        if config.sasl is not None and config.sasl.credential_store is not None:
            from .tenants import TenantWatch, open_tenant_store

            self.tenants = TenantWatch(open_tenant_store(config.sasl.credential_store))
        from .audit.wiring import attach_audit

        self.audit = attach_audit(  # Kafka admin API changes → the audit trail
            config.audit,
            policies=self.policy.store if self.policy is not None else None,
            quotas=self.quotas.store if self.quotas is not None else None,
            credentials=self.sasl_server.store if self.sasl_server is not None else None,
        )
        self.listeners = [ListenerSet(self, lst) for lst in config.listeners]
        self.connections: set[ClientConnection] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.stopping = False
        self.cluster_reachable = False
        self._stop = asyncio.Event()
        self._drained = asyncio.Event()
        self._rotation = 0
        tls = config.upstream.tls
        self.upstream_tls_material = upstream_context(tls) if tls is not None else None
        sasl = config.upstream.sasl  # UpstreamCredentialError: no usable password file
        self.upstream_identity = UpstreamIdentity.load(sasl) if sasl is not None else None
        self.api_versions = ApiVersionsCache(
            self._fetch_api_versions, config.upstream.metadata_refresh_s
        )
        self._init_tenant_identities(config)
        if sasl is not None and config.accesslog is not None and config.accesslog.topic:
            log.warning(  # TopicSink opens its own broker connections without a SASL login
                "accesslog.topic cannot authenticate to the brokers (upstream.sasl): "
                "its records will not reach the topic",
                extra={"event": "accesslog_topic_no_sasl"},
            )

    def _init_tenant_identities(self, config: GatewayConfig) -> None:
        """``upstream.tenant_identities``: per-tenant broker logins and broker ACLs."""
        from .upstream.broker_enforcement import BrokerEnforcement

        self.broker_enforcement: BrokerEnforcement | None = None
        settings = config.upstream.tenant_identities
        if settings is not None and settings.enabled and self.policy is not None:
            self.broker_enforcement = BrokerEnforcement.create(
                settings, config, self.policy, self.admin_call,
                self.metrics.registry if self.metrics is not None else None,
            )  # fmt: skip
        elif config.upstream.sasl is not None and self.policy is not None:
            log.warning(
                "upstream.tenant_identities is off: every tenant reaches the brokers as the "
                "gateway's own identity, and only the gateway's checks separate tenants",
                extra={"event": "broker_enforcement_off"},
            )
        if config.authorization is not None and not config.authorization.gateway_checks:
            log.warning(
                "authorization.gateway_checks is false: the GATEWAY DOES NOT AUTHORIZE "
                "requests, only the brokers' ACLs do (a test switch, not for production)",
                extra={"event": "gateway_checks_off"},
            )

    async def upstream_login(
        self, identity: ClientIdentity, force: bool = False
    ) -> UpstreamLogin | None:
        """Who a client connection is to the brokers: its tenant's upstream principal, or
        the gateway's own identity for super users (and when tenant identities are off).
        ``UpstreamRefused`` for anyone else (deny by default, decision 0026)."""
        enforcement = self.broker_enforcement
        if enforcement is None:
            return self.upstream_identity
        principal = identity.principal
        if principal in enforcement.super_users:
            return self.upstream_identity
        tenant = identity.tenant or enforcement.tenant_of(principal)
        if tenant is None:
            raise UpstreamRefused(f"{principal} belongs to no tenant: no broker identity")
        if self.tenants is not None and self.tenants.blocked(tenant):
            raise UpstreamRefused(f"tenant {tenant} is suspended or deleted")
        return await enforcement.identities.login(tenant, force)

    async def admin_call(self, request: Any, response_type: type[Any]) -> Any:
        """One admin request as the gateway's own identity, to the first broker that answers."""
        from .kafka_client import roundtrip
        from .protocol.codec import ProtocolError

        last = "no bootstrap server"
        login = self.upstream_identity.login if self.upstream_identity is not None else None
        timeout = self.config.upstream.connect_timeout_s
        for host, port in self.upstream_candidates(None):
            try:
                return await roundtrip(
                    host, port, request, response_type, timeout, **self.upstream_tls(), login=login
                )
            except (
                OSError, TimeoutError, asyncio.IncompleteReadError, ValueError,
                UpstreamAuthError, ProtocolError,
            ) as exc:  # fmt: skip
                last = f"{host}:{port}: {str(exc) or type(exc).__name__}"
        raise AdminUnavailable(f"no broker answered {type(request).__name__} ({last})")

    async def _fetch_api_versions(self, request: bytes) -> bytes:
        """The cluster's answer to a client's ApiVersions frame (``ApiVersionsCache``)."""
        from .kafka_client import raw_roundtrip

        last: Exception | None = None
        for host, port in self.upstream_candidates(None):
            try:
                timeout = self.config.upstream.connect_timeout_s
                return await raw_roundtrip(host, port, request, timeout, **self.upstream_tls())
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                last = exc
        raise OSError(f"no broker answered ApiVersions: {last}")

    def _watch_quotas(self, quotas: QuotaEngine) -> None:
        """The cluster's topic list for licence checks; quota figures on /metrics."""
        from .quotas.cluster_view import ClusterTopics
        from .quotas.prometheus import QuotaCollector

        def connect() -> dict[str, Any]:
            identity = getattr(self, "upstream_identity", None)
            login = identity.login if identity is not None else None
            return {**self.upstream_tls(), "login": login}

        timeout = self.config.upstream.connect_timeout_s

        def candidates() -> list[tuple[str, int]]:
            return self.upstream_candidates(None)

        self.cluster_topics = ClusterTopics(candidates, connect, timeout)
        if self.metrics is not None:
            self.metrics.registry.register(QuotaCollector(quotas.metrics))

    def tls_material(self) -> list[Reloadable]:
        found = [lst.tls.material for lst in self.listeners if lst.tls is not None]
        if self.upstream_tls_material is not None:
            found.append(self.upstream_tls_material)
        return found

    def upstream_tls(self) -> dict[str, Any]:
        """Keyword arguments for a new broker connection (TLS with the current context)."""
        if self.upstream_tls_material is None:
            return {}
        return {
            "ssl": self.upstream_tls_material.context,
            "ssl_handshake_timeout": self.config.upstream.connect_timeout_s,
        }

    def reload(self) -> None:
        """SIGHUP: reload TLS material (new connections only; bad material is refused)."""
        for material in self.tls_material():
            material.reload("SIGHUP")

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Create a task that is named, referenced until done, and logged if it fails."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "task failed",
                exc_info=task.exception(),
                extra={"event": "task_failed", "reason": task.get_name()},
            )

    def forget(self, conn: ClientConnection) -> None:
        self.connections.discard(conn)
        if self.stopping and not self.connections:
            self._drained.set()

    def _close_tenants(self, blocked: frozenset[str]) -> None:
        for conn in list(self.connections):
            if conn.identity.tenant in blocked:
                conn.close(f"tenant {conn.identity.tenant} is suspended or deleted", "gateway")

    def _on_new_broker(self, node_id: int) -> None:
        for listener in self.listeners:
            listener.ensure_broker(node_id)

    def upstream_candidates(self, node_id: int | None) -> list[tuple[str, int]]:
        if node_id is not None:
            address = self.topology.address(node_id)
            return [address] if address is not None else []
        servers = self.config.upstream.bootstrap_addresses()
        self._rotation = (self._rotation + 1) % len(servers)
        return servers[self._rotation :] + servers[: self._rotation]

    async def start(self) -> None:
        for listener in self.listeners:
            await listener.open(None)
        self.spawn("metadata-refresh", self._refresh_loop())
        if self.accesslog is not None:
            self.spawn("accesslog", self.accesslog.run())
        if self.quotas is not None:
            self.spawn("quotas", self.quotas.run(self._stop))
        if self.metrics is not None and self.config.metrics is not None:
            checks = {
                "cluster": lambda: self.cluster_reachable,
                "policies": lambda: self.policy is None or self.policy.version > 0,
            }
            self.metrics_server = serve_observability(self.config.metrics, self.metrics, checks)
            await self.metrics_server.start()
        if self.policy is not None:
            self.spawn("policy-watch", self.policy.watch(self._stop))
        else:
            log.warning(
                "authorization is off: every client may do anything the gateway's own identity may",
                extra={"event": "authorization_off"},
            )
        if self.tenants is not None:
            self.spawn("tenant-watch", self.tenants.run(self._stop, self._close_tenants))
        sasl = self.config.sasl
        if (
            self.sasl_server is not None
            and self.sasl_server.store is not None  # GSSAPI alone: nothing to revoke
            and sasl is not None
            and sasl.revalidate_interval_s > 0
        ):
            self.spawn("sasl-revalidate", self._revalidate_loop(sasl.revalidate_interval_s))
        self.spawn("idle-sweeper", self._idle_loop())
        if self.broker_enforcement is not None:
            tenants = self.tenants

            def blocked() -> frozenset[str]:
                return tenants.blocked_tenants if tenants is not None else frozenset()

            self.broker_enforcement.start(self.spawn, self._stop, blocked)
        for material in self.tls_material():
            self.spawn(f"tls-watch-{material.name}", material.watch(self._stop))

    async def _refresh_loop(self) -> None:
        from .kafka_client import fetch_brokers

        upstream = self.config.upstream
        while not self.stopping:
            for host, port in self.upstream_candidates(None):
                try:
                    brokers = await fetch_brokers(
                        host,
                        port,
                        upstream.connect_timeout_s,
                        **self.upstream_tls(),
                        login=self.upstream_identity.login if self.upstream_identity else None,
                    )
                except (
                    OSError,
                    TimeoutError,
                    asyncio.IncompleteReadError,
                    ValueError,
                    UpstreamAuthError,
                ) as exc:
                    log.warning(
                        "metadata refresh failed",
                        extra={
                            "event": "metadata_refresh_failed",
                            "upstream": f"{host}:{port}",
                            "reason": str(exc) or type(exc).__name__,
                        },
                    )
                    continue
                self.topology.replace_all(brokers)
                if not self.cluster_reachable:
                    log.info(
                        "cluster reachable",
                        extra={"event": "cluster_reachable", "count": len(brokers)},
                    )
                self.cluster_reachable = True
                break
            else:
                self.cluster_reachable = False
            delay = upstream.metadata_refresh_s if self.cluster_reachable else 1.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _idle_loop(self) -> None:
        idle = self.config.limits.idle_timeout_s
        while not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), min(5.0, idle / 2))
            cutoff = time.monotonic() - idle
            for conn in list(self.connections):
                auth = conn.session.auth
                if auth is not None and auth.expired() and conn.session.inflight == 0:
                    conn.close("SASL session lifetime ended without re-authentication", "client")
                elif conn.last_activity < cutoff and conn.session.inflight == 0:
                    conn.close(f"idle for more than {idle:g}s", "gateway")

    async def _revalidate_loop(self, interval_s: float) -> None:
        assert self.sasl_server is not None
        revalidation = Revalidation(self.sasl_server)
        while not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval_s)
            if self.stopping:
                return
            try:
                await self.revalidate_sessions(revalidation)
            except Exception:  # a bug here must not end revalidation for good
                log.exception(
                    "session revalidation failed", extra={"event": "sasl_revalidation_failed"}
                )

    async def revalidate_sessions(self, revalidation: Revalidation) -> int:
        """Close the PLAIN and SCRAM sessions whose credentials no longer hold
        (:mod:`.sasl.revalidate`): one store lookup per distinct session key, not per
        connection. Returns how many connections were closed."""
        sessions: dict[SessionKey, list[ClientConnection]] = {}
        for conn in list(self.connections):
            key = session_key(conn.identity, conn.session.auth)
            if key is not None:
                sessions.setdefault(key, []).append(conn)
        closed = 0
        for key in await revalidation.invalid(sessions):
            # Closed, or re-authenticated with another key (KIP-368), meanwhile: not this one.
            gone = [
                c
                for c in sessions[key]
                if not c.closed and session_key(c.identity, c.session.auth) == key
            ]
            if not gone:
                continue
            principal, api_key_id, mechanism = key
            log.warning(
                "credentials of %s (%s) revoked or removed; closing %d connection(s)",
                principal,
                f"API key {api_key_id}" if api_key_id else mechanism,
                len(gone),
                extra={
                    "event": "sasl_credentials_revoked",
                    "principal": principal,
                    "mechanism": mechanism,
                    "count": len(gone),
                },
            )
            for conn in gone:
                conn.close("credentials revoked or removed", "gateway")
            closed += len(gone)
        return closed

    def request_stop(self) -> None:
        if not self._stop.is_set():
            log.info("stop requested", extra={"event": "stop_requested"})
            self._stop.set()

    async def wait_stopped(self) -> None:
        await self._stop.wait()

    async def drain(self) -> None:
        """Stop accepting, let in-flight responses reach their clients, then close."""
        self.stopping = True
        self._stop.set()
        for listener in self.listeners:
            listener.close()
        for conn in list(self.connections):
            conn.begin_drain()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), self.config.shutdown.drain_timeout_s)
        for conn in list(self.connections):
            conn.close("drain timeout", "gateway")
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.accesslog is not None:
            await self.accesslog.close(5)
        if self.sasl_server is not None:
            await self.sasl_server.close()
        for task in list(self.tasks):
            task.cancel()
        log.info("gateway stopped", extra={"event": "stopped"})
