"""The upstream side: one client connection's broker connection, and how it is opened.

``UpstreamConnection`` is the gateway's connection to one broker on behalf of one
client connection (with the gateway's own SASL login first, ``upstream.sasl``);
``DeferredUpstream`` stands in for it on SASL listeners until the client has
authenticated (decision 0026); ``connect_upstream`` opens it, as the client's
upstream identity, with retries.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal, cast

from ..core.events import ResponseFrames
from ..protocol.apis import API_VERSIONS
from ..protocol.codec import peek_request
from ..protocol.framing import Frame, FrameAssembler, FrameError
from ..session import Fault
from ..upstream.identity import UpstreamIdentity
from ..upstream.provision import AdminUnavailable, TenantLogin
from ..upstream.scram_client import UpstreamAuthError
from .flow import ReadPauses

if TYPE_CHECKING:
    from ..upstream.handshake import UpstreamHandshake
    from .client import ClientConnection

log = logging.getLogger("kgw.server")
UpstreamLogin = UpstreamIdentity | TenantLogin


class UpstreamRefused(Exception):
    """This client connection may not reach the brokers under any identity."""


class UpstreamConnection(ReadPauses, asyncio.BufferedProtocol):
    """The gateway's connection to one broker on behalf of one client connection.

    Read as a ``BufferedProtocol``: a large response (Fetch) is read by the kernel
    straight into the buffer that becomes its frame (``FrameAssembler``)."""

    def __init__(self, client: ClientConnection, login: UpstreamHandshake | None = None) -> None:
        self.client = client
        self.reader = FrameAssembler(client.gateway.config.limits.max_response_bytes)
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

    def _login_received(self, frames: list[Frame]) -> None:
        """Broker answers during the gateway's own SASL exchange."""
        login = self._login
        assert login is not None and self.transport is not None
        try:
            for item in frames:
                if login.done:
                    raise UpstreamAuthError("unexpected response after SASL authentication")
                reply = login.on_frame(item)
                if reply is not None:
                    self.transport.write(reply)
        except UpstreamAuthError as exc:
            self._login_failed(exc)
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

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.received(nbytes)
        except FrameError as exc:
            self._bad_frame(exc)
            return
        self._frames_received(frames)

    def _bad_frame(self, exc: FrameError) -> None:
        if self._login is not None:
            self._login_failed(UpstreamAuthError(str(exc)))
        else:
            self.client.fail(Fault("upstream", str(exc)))

    def _frames_received(self, frames: list[Frame]) -> None:
        if not frames:
            return
        if self._login is not None:
            self._login_received(frames)
            return
        self.client.feed(ResponseFrames(frames))

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
                try:  # through the session: intersected, in order
                    frames = self.reader.feed(reply)
                except FrameError as exc:
                    self._bad_frame(exc)
                    return
                self._frames_received(frames)
        finally:
            self._worker = None
        if self._switched and not self.closed and not client.closed:
            client.gateway.spawn(f"connect-{client.conn_id}", connect_upstream(client))

    def close(self) -> None:
        self.closed = True


async def connect_upstream(client: ClientConnection) -> None:
    """Connect to the broker, retrying with backoff for up to ``connect_timeout_s``.

    A broker that refuses (killed, restarting) keeps the client waiting rather
    than accepted-then-closed at once, which some clients (kafka-python) take as
    a successful connect and retry without backoff.
    """
    loop = asyncio.get_running_loop()
    timeout = client.gateway.config.upstream.connect_timeout_s
    deadline = loop.time() + timeout
    delay, attempts, last_error = 0.1, 0, "the broker is not in the cluster"
    login = await _upstream_login(client, force=False)
    if login is False:
        return
    retries = 0  # a tenant login refused: its credential may not have reached this broker
    while not client.closed:
        for host, port in client.gateway.upstream_candidates(client.node_id):
            attempts += 1
            remaining = max(0.1, deadline - loop.time())
            try:
                upstream, error = await _try_upstream(client, host, port, remaining, login)
            except UpstreamAuthError as exc:
                if isinstance(login, TenantLogin) and retries < 3 and not client.closed:
                    retries += 1
                    await asyncio.sleep(0.25 * retries)
                    login = await _upstream_login(client, force=True)
                    if login is False:
                        return
                    continue
                _upstream_auth_failed(client, host, port, str(exc), login)
                return
            if upstream is not None:
                client._attach(upstream)
                return
            last_error = error
            if client.closed:
                return
        if loop.time() + delay >= deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    if client.closed:
        return
    log.warning(
        "upstream connect failed",
        extra=client._extra("upstream_connect_failed", reason=last_error, count=attempts),
    )
    if client.gateway.metrics is not None:
        client.gateway.metrics.upstream_error("connect")
    client.close(f"no broker reachable within {timeout:g}s ({last_error})", "upstream")


async def _upstream_login(
    client: ClientConnection, force: bool
) -> UpstreamLogin | Literal[False] | None:
    """Who this connection is to the brokers; ``False`` (and closed) if no one."""
    try:
        return await client.gateway.upstream_login(client.identity, force)
    except UpstreamRefused as exc:
        log.warning(
            "no upstream identity: %s",
            exc,
            extra=client._extra("upstream_identity_refused", principal=client.identity.principal),
        )
        client.close(str(exc), "gateway")
    except AdminUnavailable as exc:
        log.warning(
            "tenant upstream identity not provisioned: %s",
            exc,
            extra=client._extra("upstream_provision_failed", principal=client.identity.principal),
        )
        if client.gateway.metrics is not None:
            client.gateway.metrics.upstream_error("connect")
        client.close("the gateway could not provision the tenant's broker identity", "upstream")
    return False


async def _try_upstream(
    client: ClientConnection, host: str, port: int, timeout_s: float, identity: UpstreamLogin | None
) -> tuple[UpstreamConnection | None, str]:
    """Connect (and authenticate, with ``upstream.sasl``); ``UpstreamAuthError`` if refused."""
    loop = asyncio.get_running_loop()
    try:
        _, upstream = await asyncio.wait_for(
            loop.create_connection(
                lambda: UpstreamConnection(
                    client, identity.handshake() if identity is not None else None
                ),
                host,
                port,
                **client.gateway.upstream_tls(),
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
            raise UpstreamAuthError(f"no SASL answer from the broker within {limit:g}s") from None
        except UpstreamAuthError:
            upstream.close()
            raise
    return upstream, ""


def _upstream_auth_failed(
    client: ClientConnection, host: str, port: int, reason: str, identity: UpstreamLogin | None
) -> None:
    """The broker refused the gateway's own credentials: log it (no secret), close."""
    log.warning(
        "upstream SASL authentication failed: %s",
        reason,
        extra=client._extra(
            "upstream_auth_failed",
            upstream=f"{host}:{port}",
            mechanism=identity.mechanism if identity is not None else None,
            principal=identity.username if identity is not None else None,
            reason=reason,
        ),
    )
    if client.gateway.metrics is not None:
        client.gateway.metrics.upstream_error("auth")
    client.close("the gateway could not authenticate to the broker", "upstream")
