"""Pre-authentication ApiVersions from the cluster's cached answer."""

from __future__ import annotations

import asyncio
import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from gateway.protocol.codec import encode_request
from gateway.upstream.api_versions_cache import ApiVersionsCache


def _request(correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    return encode_request(18, 3, correlation_id, "c", body)


def test_one_fetch_per_version_replayed_with_each_correlation_id() -> None:
    now = [0.0]
    fetched: list[bytes] = []

    async def fetch(frame: bytes) -> bytes:
        fetched.append(frame)
        await asyncio.sleep(0.01)
        (cid,) = struct.unpack(">i", frame[8:12])
        return struct.pack(">ii", 4 + 5, cid) + b"BODY!"

    cache = ApiVersionsCache(fetch, ttl_s=10, clock=lambda: now[0])

    async def run() -> list[bytes]:
        return list(await asyncio.gather(*(cache.answer(_request(i)) for i in (7, 8, 9))))

    answers = asyncio.run(run())
    assert len(fetched) == 1
    assert [struct.unpack(">ii", a[:8]) for a in answers] == [(9, 7), (9, 8), (9, 9)]
    assert all(a[8:] == b"BODY!" for a in answers)
    now[0] = 11.0  # expired: fetched again
    asyncio.run(cache.answer(_request(10)))
    assert len(fetched) == 2
