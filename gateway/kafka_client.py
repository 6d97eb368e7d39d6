"""The gateway's own minimal Kafka client, for its control traffic (metadata refresh).

Tenant traffic never goes through here: it is proxied frame by frame by
``server``. This opens one connection per call, sends one request and
decodes the response with kio.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_
import struct
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.protocol import Entity

from .protocol.codec import decode_response, encode_request

E = TypeVar("E", bound=Entity)
Login = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

CLIENT_ID = "kgw-control"
MAX_CONTROL_RESPONSE = 16 * 1024 * 1024


async def roundtrip(
    host: str,
    port: int,
    request: Entity,
    response_type: type[E],
    timeout_s: float,
    ssl: ssl_.SSLContext | None = None,
    ssl_handshake_timeout: float | None = None,
    login: Login | None = None,
) -> E:
    """Send ``request`` to ``host:port`` (over TLS with ``ssl``) and return its decoded response.

    ``login`` authenticates the new connection first (the gateway's upstream SASL identity).
    """
    key = int(request.__api_key__)  # type: ignore[attr-defined]
    version = int(request.__version__)

    async def exchange() -> E:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=ssl, ssl_handshake_timeout=ssl_handshake_timeout if ssl else None
        )
        try:
            if login is not None:
                await login(reader, writer)
            writer.write(encode_request(key, version, 1, CLIENT_ID, request))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            payload = await reader.readexactly(size)
        finally:
            writer.close()
        return decode_response(payload, key, version, response_type)

    return await asyncio.wait_for(exchange(), timeout_s)


async def fetch_brokers(
    host: str,
    port: int,
    timeout_s: float,
    ssl: ssl_.SSLContext | None = None,
    ssl_handshake_timeout: float | None = None,
    login: Login | None = None,
) -> dict[int, tuple[str, int]]:
    """The cluster's brokers as one of them sees them: node id → private address."""
    request = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    response = await roundtrip(
        host, port, request, MetadataResponse, timeout_s, ssl, ssl_handshake_timeout, login
    )
    return {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}


async def raw_roundtrip(
    host: str,
    port: int,
    request_frame: bytes,
    timeout_s: float,
    ssl: ssl_.SSLContext | None = None,
    ssl_handshake_timeout: float | None = None,
) -> bytes:
    """Send one framed request on a fresh connection, unauthenticated (only ApiVersions
    is answered before SASL); return the response frame, size prefix included."""

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=ssl, ssl_handshake_timeout=ssl_handshake_timeout if ssl else None
        )
        try:
            writer.write(request_frame)
            await writer.drain()
            head = await reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            if not 4 <= size <= MAX_CONTROL_RESPONSE:
                raise ValueError(f"response of {size} bytes from {host}:{port}")
            return head + await reader.readexactly(size)
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout_s)
