"""A ``mutations`` quota set on a tenant, principal or API key holds without a plan
(KIP-599 throttles partition creations whoever the quota is set on), and a plan's
licence limits are not needed for it. On the real core, session and quota engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames, ResponseFrames
from gateway.protocol.codec import decode_response

from ..conftest import MakeAuthorizer
from .harness import build


def _create(h: Any, correlation_id: int, name: str) -> list[cmd.Command]:
    topic = {"name": name, "num_partitions": 100, "replication_factor": 3}
    body = {"timeout": 30000, "topics": [topic]}
    frame = h.request({"api": "CreateTopics", "version": 7, "id": correlation_id, "body": body})
    return h.handle(RequestFrames([frame]))


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "setup",
    [
        {"tenant": "acme", "quotas": {"store": {"tenant:acme": {"mutations": 1}}}},
        {"principal": "User:bob", "quotas": {"store": {"principal:User:bob": {"mutations": 1}}}},
    ],
    ids=["tenant", "principal"],
)
async def test_a_mutations_quota_without_a_plan_throttles_creations(
    tmp_path: Path, make_authorizer: MakeAuthorizer, setup: dict[str, Any]
) -> None:
    h = await build(setup, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    first = _create(h, 1, "acme.t1")
    assert [c for c in first if isinstance(c, cmd.Forward)], "the first one goes on"
    reply = {"topics": [{"name": "acme.t1", "num_partitions": 100, "replication_factor": 3}]}
    h.handle(ResponseFrames([h.response({"body": reply})]))
    second = _create(h, 2, "acme.t2")
    assert not [c for c in second if isinstance(c, cmd.Forward)]
    (answer,) = [c for c in second if isinstance(c, cmd.Reply)]
    response = decode_response(memoryview(answer.frames[0])[4:], 19, 7)
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.throttling_quota_exceeded
    assert "partition creation rate" in (topic.error_message or "")


@pytest.mark.asyncio
async def test_without_any_mutations_quota_nothing_is_counted(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    setup = {"tenant": "acme", "quotas": {"store": {"tenant:acme": {"requests": 1000}}}}
    h = await build(setup, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    assert [c for c in _create(h, 1, "anywhere") if isinstance(c, cmd.Forward)]
