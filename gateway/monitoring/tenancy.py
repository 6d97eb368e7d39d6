"""Which tenant a topic or group belongs to, as a bounded Prometheus label. No I/O.

A tenant's topics and groups share its namespace prefix (``{tenant}.`` by default,
``gateway.tenants.model``); names outside every namespace belong to the service
(``-``). At most ``max_tenants`` distinct labels are handed out; later tenants are
``other``, so the label set stays bounded whatever the cluster holds.
"""

from __future__ import annotations

from collections.abc import Collection

SERVICE = "-"
OTHER = "other"


class TenantLabels:
    """Maps resource names to tenant labels; ``known`` (when given) limits who is a tenant."""

    def __init__(
        self,
        prefix_format: str = "{tenant}.",
        max_tenants: int = 1000,
        known: Collection[str] | None = None,
    ) -> None:
        self.separator = prefix_format.replace("{tenant}", "")
        self.max_tenants = max_tenants
        self.known = known
        self._labels: set[str] = set()

    def tenant_of(self, name: str) -> str | None:
        """The tenant whose namespace ``name`` is in, else ``None``."""
        head, sep, rest = name.partition(self.separator)
        if not sep or not head or not rest:
            return None
        if self.known is not None and head not in self.known:
            return None
        return head

    def label(self, tenant: str) -> str:
        """``tenant`` as a label (``other`` once ``max_tenants`` labels are out)."""
        if tenant in self._labels:
            return tenant
        if len(self._labels) >= self.max_tenants:
            return OTHER
        self._labels.add(tenant)
        return tenant

    def of_resource(self, name: str) -> str:
        """The label of the tenant owning topic or group ``name`` (``-``: the service's)."""
        tenant = self.tenant_of(name)
        return SERVICE if tenant is None else self.label(tenant)
