"""Unknown tagged fields (KIP-482) in frames the gateway decodes. Kafka's parsers skip a
tag they do not know, so a client or broker may send one; at worst the core must turn
what it cannot read into a ``Close`` that names whose fault it was, never let an
exception out of ``Connection.handle``."""

from __future__ import annotations

from pathlib import Path

from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames, ResponseFrames
from gateway.protocol.framing import frame

from ..conftest import MakeAuthorizer
from .harness import HOST, build

POLICY = {"policy": ["p, User:alice, TOPIC, PREFIXED, a, DESCRIBE, *, allow"]}
METADATA = {"api": "Metadata", "version": 12, "id": 1, "body": {"topics": [{"name": "a"}]}}
UNKNOWN_TAG = bytes([1, 5, 1, 0])  # one tagged field: tag 5, one byte


def with_unknown_tag(data: bytes) -> bytes:
    """``data`` (a flexible-version frame with no tagged fields in its body) with one."""
    assert data[-1] == 0  # the body's empty tagged-field section
    return frame(data[4:-1] + UNKNOWN_TAG)


def test_the_tag_takes_the_place_of_the_empty_tag_section() -> None:
    assert with_unknown_tag(b"\x00\x00\x00\x02\x07\x00")[4:] == b"\x07" + UNKNOWN_TAG


async def test_a_request_with_an_unknown_tag_never_raises_out_of_the_core(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    h = await build(POLICY, tmp_path, make_authorizer)  # authorization decodes the request
    h.handle(Opened(HOST))
    commands = h.handle(RequestFrames([with_unknown_tag(h.request(METADATA))]))
    forwarded = [c for c in commands if isinstance(c, cmd.Forward)]
    closed = [c for c in commands if isinstance(c, cmd.Close)]
    assert forwarded or (closed and closed[0].side == "client")


async def test_a_response_with_an_unknown_tag_never_raises_out_of_the_core(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({}, tmp_path, make_authorizer)  # Metadata answers are always decoded
    h.handle(Opened(HOST))
    h.handle(RequestFrames([h.request(METADATA)]))
    commands = h.handle(ResponseFrames([with_unknown_tag(h.response({}))]))
    replied = [c for c in commands if isinstance(c, cmd.Reply)]
    closed = [c for c in commands if isinstance(c, cmd.Close)]
    assert replied or (closed and closed[0].side == "upstream")
