"""``upstream.tenant_identities`` wired together: the tenants' upstream logins, their
rotation, and the brokers' ACLs kept in step with the policy (decision 0026)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from ..authz.broker_acls import desired_acls, tenant_names, tenant_of
from ..authz.model import AclRule
from .acl_sync import BrokerAclSync
from .provision import AdminCall, TenantIdentities
from .settings import TenantIdentitiesConfig
from .tenant_identity import TenantSecret, upstream_principal

if TYPE_CHECKING:
    from ..authz.engine import Authorizer
    from ..config import GatewayConfig

log = logging.getLogger("kgw.upstream")
ROTATION_CHECK_S = 5.0
Spawn = Callable[[str, Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]
Blocked = Callable[[], frozenset[str]]


class BrokerEnforcement:
    def __init__(
        self,
        settings: TenantIdentitiesConfig,
        policy: Authorizer,
        identities: TenantIdentities,
        acl_sync: BrokerAclSync,
        super_users: frozenset[str],
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.identities = identities
        self.acl_sync = acl_sync
        self.super_users = super_users
        self._tenant_cache: dict[str, str | None] = {}
        self._cache_version = -1
        self._blocked: Blocked = frozenset

    @classmethod
    def create(
        cls,
        settings: TenantIdentitiesConfig,
        config: GatewayConfig,
        policy: Authorizer,
        admin: AdminCall,
        registry: CollectorRegistry | None,
    ) -> BrokerEnforcement:
        """``TenantSecretError`` when the secret file is unusable (start-up)."""
        secret = TenantSecret.load(settings)
        sasl = config.upstream.sasl
        timeout = sasl.timeout_s if sasl is not None else 10.0
        identities = TenantIdentities(secret, admin, timeout)
        super_users = frozenset(config.authorization.super_users if config.authorization else ())
        enforcement: BrokerEnforcement

        def desired() -> frozenset[AclRule]:
            return enforcement.desired_acls()

        sync = BrokerAclSync(desired, admin, settings.user_prefix, registry)
        enforcement = cls(settings, policy, identities, sync, super_users)
        return enforcement

    def tenant_of(self, principal: str) -> str | None:
        """The tenant a principal without one from SASL (a certificate) belongs to by the
        policy's role memberships; ``None`` if none or several."""
        version = self.policy.version
        if version != self._cache_version:
            self._tenant_cache, self._cache_version = {}, version
        if principal not in self._tenant_cache:
            compiled = self.policy.policy
            self._tenant_cache[principal] = tenant_of(principal, compiled.rules, compiled.members)
        return self._tenant_cache[principal]

    def tenants(self) -> set[str]:
        compiled = self.policy.policy
        return tenant_names(compiled.rules, compiled.members)

    def desired_acls(self) -> frozenset[AclRule]:
        compiled = self.policy.policy
        prefix = self.settings.user_prefix
        principals = {t: upstream_principal(t, prefix) for t in self.tenants()}
        return desired_acls(compiled.rules, compiled.members, principals, self._blocked())

    def start(self, spawn: Spawn, stop: asyncio.Event, blocked: Blocked) -> None:
        self._blocked = blocked

        def version() -> object:
            return (self.policy.version, blocked())

        spawn(
            "broker-acl-sync", self.acl_sync.run(stop, version, self.settings.acl_sync_interval_s)
        )
        spawn("tenant-identities", self._rotation_loop(stop))

    async def _rotation_loop(self, stop: asyncio.Event) -> None:
        """Provision every tenant of the policy at start, then each new generation."""
        first = True
        while not stop.is_set():
            try:
                if first:
                    for tenant in sorted(self.tenants()):
                        await self.identities.ensure(tenant)
                    first = False
                else:
                    await self.identities.rotate_due()
            except Exception as exc:  # brokers down: the next round, or the next login, retries
                log.warning(
                    "tenant identity provisioning failed: %s",
                    exc,
                    extra={"event": "tenant_identity_failed", "reason": str(exc)},
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0 if first else ROTATION_CHECK_S)
