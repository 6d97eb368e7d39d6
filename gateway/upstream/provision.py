"""Provisioning and rotation of the per-tenant upstream principals on the brokers.

``TenantIdentities.ensure(tenant)`` gives the tenant's current credential, after storing
it on the brokers (AlterUserScramCredentials through the gateway's own admin login) the
first time it is asked for in a rotation generation. Credentials are derived, never
stored (``tenant_identity``); what this keeps is which tenant was provisioned in which
generation. Rotation is an upsert of the next generation's credential: broker
connections already authenticated keep working (Kafka checks credentials at login only),
new ones log in with the new password.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

from .handshake import UpstreamHandshake
from .identity import drive_login
from .tenant_identity import TenantCredential, TenantSecret

log = logging.getLogger("kgw.upstream")
AdminCall = Callable[[Entity, type[Any]], Awaitable[Any]]


class ProvisionError(Exception):
    """The brokers did not store a tenant's credential; the message names no secret."""


class AdminUnavailable(Exception):
    """No broker answered the gateway's admin request (or the brokers refused it)."""


class TenantLogin:
    """A tenant's upstream login for one broker connection (as ``UpstreamIdentity``)."""

    def __init__(self, credential: TenantCredential, timeout_s: float) -> None:
        self.credential = credential
        self.timeout_s = timeout_s

    @property
    def mechanism(self) -> str:
        return self.credential.mechanism

    @property
    def username(self) -> str:
        return self.credential.username

    @property
    def tenant(self) -> str:
        return self.credential.tenant

    def __repr__(self) -> str:
        return f"TenantLogin({self.mechanism}, {self.username!r})"

    def handshake(self) -> UpstreamHandshake:
        cred = self.credential
        return UpstreamHandshake(cred.mechanism, cred.username, cred.password)

    async def login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Authenticate a fresh stream connection as the tenant (``UpstreamAuthError``)."""
        await drive_login(self.handshake(), reader, writer)


class TenantIdentities:
    """Which tenants' credentials the brokers hold, for which generation."""

    def __init__(
        self,
        secret: TenantSecret,
        admin: AdminCall,
        timeout_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret = secret
        self._admin = admin
        self._timeout_s = timeout_s
        self._clock = clock
        self._provisioned: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.rotations = 0

    @property
    def provisioned(self) -> dict[str, int]:
        return dict(self._provisioned)

    def current(self, tenant: str) -> TenantCredential:
        return self.secret.credential(tenant, self.secret.generation(self._clock()))

    async def login(self, tenant: str, force: bool = False) -> TenantLogin:
        return TenantLogin(await self.ensure(tenant, force), self._timeout_s)

    async def ensure(self, tenant: str, force: bool = False) -> TenantCredential:
        """The tenant's current credential, stored on the brokers first if needed."""
        credential = self.current(tenant)
        if not force and self._provisioned.get(tenant) == credential.generation:
            return credential
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            credential = self.current(tenant)
            if not force and self._provisioned.get(tenant) == credential.generation:
                return credential
            await self._upsert(credential)
            previous = self._provisioned.get(tenant)
            self._provisioned[tenant] = credential.generation
            if previous is not None and previous != credential.generation:
                self.rotations += 1
            log.info(
                "tenant upstream identity provisioned",
                extra={
                    "event": "tenant_identity_provisioned",
                    "principal": f"User:{credential.username}",
                    "mechanism": credential.mechanism,
                    "count": credential.generation,
                    "reason": f"tenant {tenant}, generation {credential.generation}",
                },
            )
        return credential

    async def rotate_due(self) -> int:
        """Upsert the new generation of every tenant provisioned in an older one."""
        now = self.secret.generation(self._clock())
        due = [t for t, gen in self._provisioned.items() if gen != now]
        for tenant in due:
            await self.ensure(tenant)
        return len(due)

    async def _upsert(self, credential: TenantCredential) -> None:
        upsertion = await asyncio.to_thread(credential.upsertion)  # PBKDF2 off the loop
        request = AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,))
        response = await self._admin(request, AlterUserScramCredentialsResponse)
        for result in response.results:
            if result.error_code != ErrorCode.none:
                raise ProvisionError(
                    f"the brokers refused the credential of {result.user} "
                    f"({result.error_code.name}: {result.error_message})"
                )
