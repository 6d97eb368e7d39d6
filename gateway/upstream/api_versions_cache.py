"""The cluster's ApiVersions answer, for clients that have not authenticated yet.

On SASL listeners the gateway opens no broker connection before the client has
authenticated, yet clients ask ApiVersions first. The broker's answer to each request
version is fetched once on a fresh, unauthenticated control connection (brokers answer
ApiVersions before SASL), kept for ``ttl_s`` and replayed with the client's correlation
id; the session then intersects it with the gateway's versions exactly as it does a
forwarded answer, so the client sees the same intersection either way.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable

from ..protocol.codec import peek_request

Fetch = Callable[[bytes], Awaitable[bytes]]  # a framed request → the broker's framed response


class ApiVersionsCache:
    def __init__(self, fetch: Fetch, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._clock = clock
        self._bodies: dict[int, tuple[float, bytes]] = {}  # version → (fetched at, body)
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self.fetches = 0

    async def answer(self, request: bytes) -> bytes:
        """The broker's framed answer to ``request`` (an ApiVersions frame, size included)."""
        _, version, correlation_id = peek_request(memoryview(request)[4:])
        body = await self._body(version, request)
        return struct.pack(">ii", len(body) + 4, correlation_id) + body

    async def _body(self, version: int, request: bytes) -> bytes:
        cached = self._bodies.get(version)
        if cached is not None and self._clock() - cached[0] < self._ttl_s:
            return cached[1]
        pending = self._pending.get(version)
        if pending is None:
            pending = asyncio.ensure_future(self._load(version, request))
            self._pending[version] = pending
            pending.add_done_callback(lambda _: self._pending.pop(version, None))
        return await asyncio.shield(pending)

    async def _load(self, version: int, request: bytes) -> bytes:
        self.fetches += 1
        response = await self._fetch(request)
        body = response[8:]  # size, correlation id (ApiVersions responses use header v0)
        self._bodies[version] = (self._clock(), body)
        return body
