"""What the access log's writer needs from a sink."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .pending import Queued

Drops = dict[str, int]
"""Entries a sink could not keep, by reason (e.g. ``too_large``)."""


class SinkError(Exception):
    """A write failed after the first ``written`` entries of the batch were done."""

    def __init__(self, reason: str, written: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.written = written


class Sink(Protocol):
    """Writes batches of records, in order. ``write`` never runs twice at once."""

    name: str

    async def write(self, entries: list[Queued]) -> Drops:
        """Write every entry (returning those dropped by reason) or raise ``SinkError``.
        ``pending.entry_of`` gives an entry's record (it may be one still to build)."""
        ...

    async def close(self) -> None: ...
