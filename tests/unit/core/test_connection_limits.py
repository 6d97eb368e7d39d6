"""Connection limits as the core counts them: one engine shared by several connections
from one address, opened and closed through ``Connection.handle``."""

from __future__ import annotations

from pathlib import Path

from gateway.core import Connection
from gateway.core import commands as cmd
from gateway.core.events import Closed, Opened
from gateway.core.states import State

from ..conftest import MakeAuthorizer
from .harness import HOST, build

ONE_PER_ADDRESS = {"quotas": {"config": {"address_limits": {"max_connections": 1}}}}


async def _connections(n: int, tmp_path: Path, authorizer: MakeAuthorizer) -> list[Connection]:
    """``n`` connections sharing the first one's quota engine (as one gateway's do)."""
    first = await build(ONE_PER_ADDRESS, tmp_path, authorizer)
    engine = first.connection.services.quotas
    assert engine is not None
    others = []
    for _ in range(n - 1):
        other = await build(ONE_PER_ADDRESS, tmp_path, authorizer)
        other.connection.services = first.connection.services
        others.append(other.connection)
    return [first.connection, *others]


async def test_a_second_connection_from_an_address_at_its_limit_is_refused(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    a, b = await _connections(2, tmp_path, make_authorizer)
    assert a.handle(Opened(HOST)) == [] and a.state is State.OPEN
    (close,) = b.handle(Opened(HOST))
    assert isinstance(close, cmd.Close) and close.side == "client"
    assert b.state is State.CLOSED


async def test_closing_a_counted_connection_frees_its_place(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    a, b = await _connections(2, tmp_path, make_authorizer)
    a.handle(Opened(HOST))
    a.handle(Closed("client disconnected"))
    assert b.handle(Opened(HOST)) == [] and b.state is State.OPEN


async def test_a_refused_connection_does_not_free_the_place_of_an_open_one(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    a, b, c = await _connections(3, tmp_path, make_authorizer)
    assert a.handle(Opened(HOST)) == []  # counted: the address is at its limit
    assert isinstance(b.handle(Opened(HOST))[0], cmd.Close)  # refused, never counted
    b.handle(Closed("client disconnected"))  # the network layer reports the close
    (close,) = c.handle(Opened(HOST))  # a is still open: c must be refused too
    assert isinstance(close, cmd.Close)
