"""Flow control on one transport: reading stops while any reason holds it back."""

from __future__ import annotations

import asyncio


class ReadPauses:
    """Reasons that hold back reading a connection's transport; reading resumes once no
    reason is left. Shared by the client and the upstream side of a connection."""

    transport: asyncio.Transport | None
    closed: bool
    _paused: set[str]

    def pause(self, reason: str) -> None:
        self._paused.add(reason)
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume(self, reason: str) -> None:
        if reason not in self._paused:
            return
        self._paused.discard(reason)
        if not self._paused and self.transport is not None and not self.closed:
            self.transport.resume_reading()
