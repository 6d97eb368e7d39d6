"""Tenants: onboarding, lifecycle and the gateway's view of blocked tenants.

| module | concern | I/O |
| --- | --- | --- |
| ``model`` | ``Tenant``, names, namespace prefix, the role's rules | none |
| ``store`` | ``TenantStore`` beside the credential store (file or Redis) | file, Redis |
| ``bundle`` | the connection bundle's files (Java, librdkafka, kafka-python) | writes a directory |
| ``onboard`` | create / suspend / resume / delete through the existing stores | via the stores |
| ``cluster`` | the tenant's topics in the cluster (``--delete-data``) | Kafka control requests |
| ``watch`` | ``TenantWatch``: the gateway polls blocked tenants | via the store |
"""

from __future__ import annotations

from .model import Tenant, TenantError, TenantState
from .store import TenantStore, TenantStoreError, open_tenant_store
from .watch import TenantWatch

__all__ = [
    "Tenant",
    "TenantError",
    "TenantState",
    "TenantStore",
    "TenantStoreError",
    "TenantWatch",
    "open_tenant_store",
]
