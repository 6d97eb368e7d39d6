"""What an enforcement unit decides about one request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..authz.model import Operation, ResourceType

Check = Callable[[ResourceType, str, Operation], bool]
"""Is the connection's principal allowed ``operation`` on this resource?"""

Merge = Callable[[Any], Any]
"""Turns the broker's response into the one the client gets."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """``forward`` None with ``local`` set: answered by the gateway, nothing reaches a broker.
    ``forward`` set: send it (the original bytes when ``rewritten`` is False) and pass
    the response through ``merge`` (None: untouched). ``close``: drop the connection."""

    forward: Any | None = None
    rewritten: bool = False
    merge: Merge | None = None
    local: Any | None = None
    close: str | None = None
    denied: int = 0


PASS = Verdict(forward=True)
