"""A bug anywhere below the core closes its connection as the gateway's fault; the
exception never escapes ``Connection.handle`` into the network layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames, ResponseFrames
from gateway.core.states import State

from ..conftest import MakeAuthorizer
from .harness import HOST, build

METADATA = {"api": "Metadata", "version": 12, "id": 1, "body": {"topics": [{"name": "a"}]}}


async def test_an_unexpected_exception_closes_only_this_connection(
    tmp_path: Path, make_authorizer: MakeAuthorizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await build({}, tmp_path, make_authorizer)
    h.handle(Opened(HOST))
    h.handle(RequestFrames([h.request(METADATA)]))

    def broken(data: bytes) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(h.connection.session, "on_response", broken)
    commands = h.handle(ResponseFrames([h.response({})]))
    assert commands == [cmd.Close("internal error: RuntimeError", "gateway")]
    assert h.connection.state is State.CLOSED
    assert h.connection.handle(ResponseFrames([b"\x00\x00\x00\x00"])) == []
