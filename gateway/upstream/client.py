"""The gateway's one client for its own traffic to the brokers (decision 0027).

Tenant traffic never goes through here: it is proxied frame by frame by
``gateway.runtime``. ``BrokerClient`` is built once from the ``upstream`` section
(bootstrap servers, the upstream TLS context, the gateway's SASL identity, timeouts)
and serves every request the gateway makes as itself: the metadata refresh, the
pre-authentication ApiVersions answer, admin requests (tenant identities, broker
ACLs), the licence checks' topic list, ``kgw tenant delete --delete-data`` and the
access log's topic sink, which keeps one ``BrokerConnection`` to a partition leader.

Every connection it opens takes the current upstream TLS context (rotation applies
to new connections) and, with ``upstream.sasl``, logs in before its first request;
only ``raw_roundtrip`` does not, because brokers answer ApiVersions before SASL.
Errors name the broker and the reason, never a secret.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl as ssl_
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.protocol import Entity

from ..protocol.codec import ProtocolError, decode_response, encode_request
from ..tls.reloader import Reloadable
from .handshake import UpstreamHandshake
from .identity import drive_login
from .scram_client import UpstreamAuthError

if TYPE_CHECKING:
    from ..config import UpstreamConfig

E = TypeVar("E", bound=Entity)
T = TypeVar("T")
Address = tuple[str, int]

CLIENT_ID = "kgw-control"
MAX_RESPONSE_BYTES = 100 * 1024 * 1024  # the brokers' own socket.request.max.bytes default
_SIZE = struct.Struct(">i")

BROKER_ERRORS: tuple[type[Exception], ...] = (
    OSError,  # refused, reset, TLS failures (ssl.SSLError)
    TimeoutError,
    asyncio.IncompleteReadError,  # the broker hung up
    ValueError,
    ProtocolError,  # a response that does not decode
    UpstreamAuthError,  # the broker refused the login
)
"""What one exchange with one broker may fail with; anything else is a bug."""


class Login(Protocol):
    """A broker login: the gateway's ``UpstreamIdentity`` or a tenant's ``TenantLogin``."""

    def handshake(self) -> UpstreamHandshake: ...


class BrokerUnavailable(Exception):
    """No bootstrap server answered; ``reason`` names the last one tried and why.

    ``address`` and ``error`` are that server and its failure (None: no server at all),
    for callers that say less, e.g. to a tenant's client.
    """

    def __init__(self, address: Address | None = None, error: BaseException | None = None) -> None:
        self.address = address
        self.error = error
        if address is None or error is None:
            self.reason = "no bootstrap server"
        else:
            self.reason = f"{address[0]}:{address[1]}: {describe(error)}"
        super().__init__(self.reason)

    @property
    def brief(self) -> str:
        """The server and the kind of failure only (``host:port: TimeoutError``)."""
        if self.address is None or self.error is None:
            return self.reason
        return f"{self.address[0]}:{self.address[1]}: {type(self.error).__name__}"


def describe(exc: BaseException) -> str:
    """One failure in words, for logs and errors (exception texts here hold no secret)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class BrokerConnection:
    """One (authenticated) connection to one broker; requests one at a time, in order."""

    def __init__(
        self, address: Address, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._correlation = itertools.count(1)

    async def request(self, request: Entity, response_type: type[E]) -> E:
        """Send ``request``; its decoded response (``ProtocolError`` if it is not one)."""
        key = int(request.__api_key__)  # type: ignore[attr-defined]
        version = int(request.__version__)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        self._writer.write(encode_request(key, version, correlation_id, CLIENT_ID, request))
        await self._writer.drain()
        payload = (await self._read_frame())[4:]
        if _SIZE.unpack_from(payload, 0)[0] != correlation_id:
            host, port = self.address
            raise ProtocolError(f"{host}:{port} answered another request")
        return decode_response(payload, key, version, response_type)

    async def exchange_frame(self, frame: bytes) -> bytes:
        """Send one framed request as it is; the response frame, size prefix included."""
        self._writer.write(frame)
        await self._writer.drain()
        return await self._read_frame()

    async def _read_frame(self) -> bytes:
        head = await self._reader.readexactly(4)
        (size,) = _SIZE.unpack(head)
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            host, port = self.address
            raise ProtocolError(f"response of {size} bytes from {host}:{port}")
        return head + await self._reader.readexactly(size)

    def close(self) -> None:
        self._writer.close()


class BrokerClient:
    """The gateway's connections to its brokers: TLS, SASL login, timeouts, bootstrap."""

    def __init__(
        self,
        bootstrap: Sequence[Address],
        *,
        tls: Reloadable | ssl_.SSLContext | None = None,
        identity: Login | None = None,
        timeout_s: float = 10.0,
        handshake_timeout_s: float | None = None,
    ) -> None:
        self._servers = list(bootstrap)
        self._rotation = 0
        self.tls = tls
        self.identity = identity
        self.timeout_s = timeout_s
        self.handshake_timeout_s = handshake_timeout_s or timeout_s

    @classmethod
    def from_config(cls, upstream: UpstreamConfig, timeout_s: float | None = None) -> BrokerClient:
        """Loads the TLS material (``MaterialError``) and the password file
        (``UpstreamCredentialError``) of ``upstream``; for one-shot tools such as ``kgw``."""
        from ..tls.upstream import upstream_context
        from .identity import UpstreamIdentity

        tls = upstream_context(upstream.tls) if upstream.tls is not None else None
        identity = UpstreamIdentity.load(upstream.sasl) if upstream.sasl is not None else None
        return cls(
            upstream.bootstrap_addresses(),
            tls=tls,
            identity=identity,
            timeout_s=timeout_s or upstream.connect_timeout_s,
            handshake_timeout_s=upstream.connect_timeout_s,
        )

    def with_identity(self, identity: Login | None) -> BrokerClient:
        """The same servers and TLS, logging in as ``identity`` (e.g. a tenant's login)."""
        return BrokerClient(
            self._servers,
            tls=self.tls,
            identity=identity,
            timeout_s=self.timeout_s,
            handshake_timeout_s=self.handshake_timeout_s,
        )

    def bootstrap(self) -> list[Address]:
        """The bootstrap servers, each call starting with the next one."""
        servers = self._servers
        if not servers:
            return []
        self._rotation = (self._rotation + 1) % len(servers)
        return servers[self._rotation :] + servers[: self._rotation]

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``asyncio``'s connection calls: TLS with the current context."""
        tls = self.tls
        if tls is None:
            return {}
        context = tls.context if isinstance(tls, Reloadable) else tls
        return {"ssl": context, "ssl_handshake_timeout": self.handshake_timeout_s}

    async def connect(
        self, address: Address, *, login: bool = True, timeout_s: float | None = None
    ) -> BrokerConnection:
        """A new connection to ``address``, logged in with the identity (if any and ``login``)."""

        async def open_() -> BrokerConnection:
            reader, writer = await asyncio.open_connection(*address, **self.connect_kwargs())
            try:
                if login and self.identity is not None:
                    await drive_login(self.identity.handshake(), reader, writer)
            except BaseException:
                writer.close()
                raise
            return BrokerConnection(address, reader, writer)

        return await asyncio.wait_for(open_(), timeout_s or self.timeout_s)

    async def roundtrip(
        self,
        address: Address,
        request: Entity,
        response_type: type[E],
        timeout_s: float | None = None,
    ) -> E:
        """``request`` on a new connection to ``address``; that broker's error if it fails."""
        return await self._once(
            address, lambda conn: conn.request(request, response_type), True, timeout_s
        )

    async def raw_roundtrip(
        self, address: Address, frame: bytes, timeout_s: float | None = None
    ) -> bytes:
        """One framed request on a new, unauthenticated connection (only ApiVersions is
        answered before SASL); the response frame, size prefix included."""
        return await self._once(address, lambda conn: conn.exchange_frame(frame), False, timeout_s)

    async def brokers(self, address: Address, timeout_s: float | None = None) -> dict[int, Address]:
        """The cluster's brokers as the one at ``address`` sees them: node id → address."""
        request = MetadataRequest(
            topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        response = await self.roundtrip(address, request, MetadataResponse, timeout_s)
        return {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}

    async def ask(
        self, request: Entity, response_type: type[E], timeout_s: float | None = None
    ) -> E:
        """``request`` to the first bootstrap server that answers (``BrokerUnavailable``)."""
        return await self._first(lambda a: self.roundtrip(a, request, response_type, timeout_s))

    async def ask_raw(self, frame: bytes, timeout_s: float | None = None) -> bytes:
        """``raw_roundtrip`` with the first bootstrap server that answers."""
        return await self._first(lambda a: self.raw_roundtrip(a, frame, timeout_s))

    async def _once(
        self,
        address: Address,
        exchange: Callable[[BrokerConnection], Awaitable[T]],
        login: bool,
        timeout_s: float | None,
    ) -> T:
        async def run() -> T:
            conn = await self.connect(address, login=login, timeout_s=limit)
            try:
                return await exchange(conn)
            finally:
                conn.close()

        limit = timeout_s or self.timeout_s
        return await asyncio.wait_for(run(), limit)

    async def _first(self, attempt: Callable[[Address], Awaitable[T]]) -> T:
        failure = BrokerUnavailable()
        for address in self.bootstrap():
            try:
                return await attempt(address)
            except BROKER_ERRORS as exc:
                failure = BrokerUnavailable(address, exc)
        raise failure
