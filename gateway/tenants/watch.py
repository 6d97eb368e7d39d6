"""The gateway's view of which tenants are blocked (suspended or deleted).

``TenantWatch.run`` looks at the tenant store every ``interval_s`` (0.25 s: a state
change reaches every instance within half a second; a file store is stat'ed on a
thread of its own and read only when it changed, decision 0048) and calls ``on_blocked`` with
the blocked tenants whenever the set is not empty, so connections that slipped in
between two polls are closed at the next one. ``blocked(tenant)`` is a set lookup
for the authentication path. When the store cannot be read the last known state
stays in force (one ``tenant_store_unavailable`` line, one ``tenant_store_available``
when it recovers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..filewatch import FilePoller
from .model import TenantError
from .store import TenantStore

log = logging.getLogger("kgw.tenants")
POLL_S = 0.25
RECHECK_S = 30.0  # a file store is read this often even when no change was seen


class TenantWatch:
    def __init__(self, store: TenantStore, interval_s: float = POLL_S) -> None:
        self.store = store
        self.interval_s = interval_s
        self._blocked: frozenset[str] = frozenset()
        self._transparent: frozenset[str] = frozenset()  # namespace: transparent
        self.available = True

    @property
    def blocked_tenants(self) -> frozenset[str]:
        return self._blocked

    def blocked(self, tenant: str | None) -> bool:
        return tenant is not None and tenant in self._blocked

    def transparent(self, tenant: str) -> bool:
        """Whether the store says the tenant's clients use plain names (gateway/namespaces)."""
        return tenant in self._transparent

    async def refresh(self) -> frozenset[str]:
        """Read the store once; the blocked set (the last known one if unreadable)."""
        try:
            tenants = await self.store.all()
        except TenantError as exc:
            if self.available:
                self.available = False
                log.warning(
                    "tenant store unavailable: %s",
                    exc,
                    extra={"event": "tenant_store_unavailable", "reason": type(exc).__name__},
                )
            return self._blocked
        if not self.available:
            self.available = True
            log.info("tenant store available", extra={"event": "tenant_store_available"})
        blocked = frozenset(name for name, tenant in tenants.items() if tenant.blocked)
        self._transparent = frozenset(n for n, tenant in tenants.items() if tenant.transparent)
        if blocked != self._blocked:
            log.info(
                "blocked tenants changed",
                extra={"event": "tenants_blocked", "count": len(blocked)},
            )
        self._blocked = blocked
        return blocked

    async def run(self, stop: asyncio.Event, on_blocked: Callable[[frozenset[str]], None]) -> None:
        """A file store is read when ``FilePoller`` saw it change (stat'ed every
        ``interval_s`` on a thread of its own) and every ``RECHECK_S``; a Redis store
        every ``interval_s``. While tenants are blocked, ``on_blocked`` is called every
        ``interval_s`` either way."""
        files = self.store.watched_files()
        poller = FilePoller(files, self.interval_s) if files else None
        if poller is not None:
            poller.start()
        stop_task = asyncio.create_task(stop.wait(), name="tenant-watch-stop")
        try:
            read = True
            while not stop.is_set():
                if read:
                    blocked = await self.refresh()
                else:
                    blocked = self._blocked
                if blocked:
                    on_blocked(blocked)
                if poller is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.interval_s)
                    continue
                timeout = self.interval_s if blocked else RECHECK_S
                poll_task = asyncio.create_task(poller.wait(timeout), name="tenant-watch-poll")
                await asyncio.wait({stop_task, poll_task}, return_when=asyncio.FIRST_COMPLETED)
                poll_task.cancel()
                # a change, or a quiet RECHECK_S; not a blocked tenant's interval tick
                read = (
                    poll_task.done()
                    and not poll_task.cancelled()
                    and (poll_task.result() or not blocked)
                )
        finally:
            stop_task.cancel()
            if poller is not None:
                poller.close()
            await self.store.close()
