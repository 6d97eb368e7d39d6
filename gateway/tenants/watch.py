"""The gateway's view of which tenants are blocked (suspended or deleted).

``TenantWatch.run`` polls the tenant store every ``interval_s`` (0.25 s: a state
change reaches every instance within half a second) and calls ``on_blocked`` with
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

from .model import TenantError
from .store import TenantStore

log = logging.getLogger("kgw.tenants")
POLL_S = 0.25


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
        try:
            while not stop.is_set():
                blocked = await self.refresh()
                if blocked:
                    on_blocked(blocked)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            await self.store.close()
