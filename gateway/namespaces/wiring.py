"""Building the namespace filter from the configuration (``runtime.gateway`` calls this)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .directory import Directory
from .filter import NamespaceFilter

if TYPE_CHECKING:
    from ..config import GatewayConfig
    from ..filters.api import Filter
    from ..tenants import TenantWatch


def namespace_filters(config: GatewayConfig, tenants: TenantWatch | None) -> list[Filter]:
    """``[NamespaceFilter]`` when ``namespaces:`` is configured, else ``[]``. The tenant
    store's ``namespace: transparent`` tenants count too, when there is a store."""
    settings = config.namespaces
    if settings is None:
        return []
    store = tenants.transparent if tenants is not None else None
    # the ACL APIs are answered by the gateway only with authorization configured
    return [NamespaceFilter(Directory(settings, store), config.authorization is not None)]
