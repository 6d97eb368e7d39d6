"""A Fetch asks the broker for no more than the fetch quota can pay for in one answer
(the burst and ``max_throttle_ms`` of the rate), as Kafka's brokers cap ``max_bytes``
at the quota window: one huge answer would otherwise cost one capped throttle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames
from gateway.protocol.codec import decode_request, parse_request_head

from ..conftest import MakeAuthorizer
from .harness import build


def _forwarded_fetch(out: list[cmd.Command]) -> Any:
    (frame,) = [f for c in out if isinstance(c, cmd.Forward) for f in c.frames]
    payload = memoryview(frame)[4:]
    return decode_request(parse_request_head(payload), payload)


def _fetch(h: Any, max_bytes: int, min_bytes: int = 1) -> bytes:
    partitions = [{"partition": 0, "partition_max_bytes": 1_048_576}]
    body = {"replica_id": -1, "max_wait": 500, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "topics": [{"topic": "acme.t", "partitions": partitions}]}  # fmt: skip
    return h.request({"api": "Fetch", "version": 12, "id": 1, "body": body})


@pytest.mark.asyncio
async def test_a_fetch_asks_for_no_more_than_the_quota_pays_for(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    rate = {"fetch_bytes": 100_000, "fetch_bytes_burst": 50_000}
    h = await build({"tenant": "acme", "quotas": {"store": {"tenant:acme": rate}}}, tmp_path,
                    make_authorizer)  # fmt: skip
    h.handle(Opened(h.identity.host))
    sent = _forwarded_fetch(h.handle(RequestFrames([_fetch(h, 52_428_800, 2_000_000)])))
    most = 50_000 + 100_000 * 10  # burst + rate x max_throttle_ms (10 s by default)
    assert sent.max_bytes == most and sent.min_bytes == most


@pytest.mark.asyncio
async def test_a_fetch_within_the_quota_or_without_one_goes_as_sent(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    rate = {"fetch_bytes": 100_000_000}
    h = await build({"tenant": "acme", "quotas": {"store": {"tenant:acme": rate}}}, tmp_path,
                    make_authorizer)  # fmt: skip
    h.handle(Opened(h.identity.host))
    frame = _fetch(h, 52_428_800)
    out = h.handle(RequestFrames([frame]))
    (forwarded,) = [f for c in out if isinstance(c, cmd.Forward) for f in c.frames]
    assert forwarded == frame  # not even re-encoded
    other = await build({"tenant": "acme", "quotas": {"store": {}}}, tmp_path / "b",
                        make_authorizer)  # fmt: skip
    other.handle(Opened(other.identity.host))
    assert _forwarded_fetch(other.handle(RequestFrames([_fetch(other, 52_428_800)]))).max_bytes == (
        52_428_800
    )


@pytest.mark.asyncio
async def test_a_share_fetch_answer_is_charged_to_fetch_bytes(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    import uuid

    from gateway.core.events import ResponseFrames

    rate = {"fetch_bytes": 1000, "fetch_bytes_burst": 1000}
    h = await build({"tenant": "acme", "quotas": {"store": {"tenant:acme": rate}}}, tmp_path,
                    make_authorizer)  # fmt: skip
    h.handle(Opened(h.identity.host))
    body = {"group_id": "acme.g", "member_id": "m", "share_session_epoch": 0, "max_wait": 0,
            "min_bytes": 1, "max_bytes": 50_000_000, "topics": []}  # fmt: skip
    out = h.handle(
        RequestFrames([h.request({"api": "ShareFetch", "version": 1, "id": 1, "body": body})])
    )
    assert [c for c in out if isinstance(c, cmd.Forward)]
    records = b"x" * 1_000_000
    partitions = [{"partition_index": 0, "records": records}]
    answer = {"responses": [{"topic_id": str(uuid.uuid4()), "partitions": partitions}]}
    out = h.handle(ResponseFrames([h.response({"body": answer})]))
    engine = h.connection.services.quotas
    assert engine is not None and engine.counters["charged_total.fetch_bytes"] > 1_000_000
    assert [c for c in out if isinstance(c, cmd.StartTimer) and c.name == "throttle"]
