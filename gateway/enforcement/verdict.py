"""What an enforcement unit decides about one request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..authz.model import Operation, ResourceType

Check = Callable[[ResourceType, str, Operation], bool]
"""Is the connection's principal allowed ``operation`` on this resource?"""

Merge = Callable[[Any], Any]
"""Turns the broker's response into the one the client gets."""


@dataclass(frozen=True, slots=True)
class Deferred:
    """Local work (a store write, a metadata read) the request must wait for.

    The session hands it to the network layer, which awaits ``run()`` and gives the
    result, or the exception it raised, back to ``finish``; ``finish`` then decides
    (a ``Verdict`` without ``defer``). Later requests on the connection wait meanwhile,
    so responses still leave in request order."""

    name: str
    run: Callable[[], Awaitable[Any]]
    finish: Callable[[Any], Verdict]


@dataclass(frozen=True, slots=True)
class Verdict:
    """``forward`` None with ``local`` set: answered by the gateway, nothing reaches a broker.
    ``forward`` set: send it (the original bytes when ``rewritten`` is False) and pass
    the response through ``merge`` (None: untouched). ``close``: drop the connection.
    ``defer``: nothing is decided yet; run the work first (see ``Deferred``)."""

    forward: Any | None = None
    rewritten: bool = False
    merge: Merge | None = None
    local: Any | None = None
    close: str | None = None
    denied: int = 0
    defer: Deferred | None = None


PASS = Verdict(forward=True)
