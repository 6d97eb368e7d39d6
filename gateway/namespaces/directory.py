"""Which connections get transparent names, and under which prefix. Pure lookups.

A connection is namespaced when its tenant is known (authenticated with a tenant's
credential), the tenant is transparent (the configuration's ``transparent_tenants``
or the tenant store's ``namespace: transparent``, read by ``TenantWatch``), and the
listener is one the namespaces apply to. Everyone else — operators, super users,
principals of no tenant, other listeners — sees cluster-side names.
"""

from __future__ import annotations

from collections.abc import Callable

from .names import Namespace
from .settings import NamespacesConfig

StoreView = Callable[[str], bool]  # tenant → transparent in the tenant store


class Directory:
    def __init__(self, config: NamespacesConfig, store: StoreView | None = None) -> None:
        self.config = config
        self._static = frozenset(config.transparent_tenants)
        self._every = "*" in self._static
        self._listeners = frozenset(config.listeners)
        self._store = store
        self._cache: dict[str, Namespace] = {}

    def applies_to_listener(self, listener: str) -> bool:
        return not self._listeners or listener in self._listeners

    def transparent(self, tenant: str) -> bool:
        if self._every or tenant in self._static:
            return True
        return self._store is not None and self._store(tenant)

    def namespace(self, tenant: str | None, listener: str) -> Namespace | None:
        """The connection's namespace, or ``None``: cluster-side names."""
        if tenant is None or not self.applies_to_listener(listener):
            return None
        if not self.transparent(tenant):
            return None
        found = self._cache.get(tenant)
        if found is None:
            if len(self._cache) > 65536:
                self._cache.clear()
            prefix = self.config.prefix_format.replace("{tenant}", tenant)
            found = self._cache[tenant] = Namespace(tenant, prefix)
        return found
