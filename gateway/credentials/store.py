"""The credential store: API keys and SCRAM credentials, shared by every gateway
instance and by ``kgw apikey`` / ``kgw scram``.

``CredentialStore`` holds the logic (hashing, validation, hooks, a short cache);
a ``Backend`` holds records: a JSON file for a single instance
(``file_backend``) or Redis for several (``redis_backend``). Records are plain
JSON objects in four tables: ``api_keys``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
and ``meta``.

Lookups are not cached unless ``cache_ttl_s`` (at most 1 s) says so, and then
only what was found: a revoked key or removed user stops authenticating within
that TTL on every instance. Every change is handed to the hooks as
``hook(actor, action, target, before, after)`` with the records' public views
(never a hash or key), for the audit trail.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .hashing import (
    SCRAM_HASHES,
    SCRAM_MAX_ITERATIONS,
    SCRAM_MIN_ITERATIONS,
    hash_secret,
    new_key_id,
    new_scram_salt,
    new_secret,
    scram_keys,
)
from .model import (
    DESCRIPTION_MAX,
    ApiKey,
    InvalidCredential,
    ScramCredential,
    check_principal,
    check_scram_user,
    check_tenant,
)

log = logging.getLogger("kgw.credentials")

API_KEYS = "api_keys"
META = "meta"
TABLES = (API_KEYS, *SCRAM_HASHES, META)
MOCK_SEED = "scram_mock_seed"
MAX_CACHE_TTL_S = 1.0

Record = dict[str, Any]
Hook = Callable[[str, str, str, "Record | None", "Record | None"], None]


class StoreError(Exception):
    """The store cannot be read or written right now (file, permissions, Redis)."""


class Backend(Protocol):
    async def get(self, table: str, key: str) -> Record | None: ...

    async def all(self, table: str) -> dict[str, Record]: ...

    async def insert(self, table: str, key: str, record: Record) -> bool:
        """Store ``record`` unless ``key`` exists; False if it did."""
        ...

    async def put(self, table: str, key: str, record: Record) -> None: ...

    async def delete(self, table: str, key: str) -> bool: ...

    async def close(self) -> None: ...


class CredentialStore:
    def __init__(
        self,
        backend: Backend,
        *,
        cache_ttl_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 <= cache_ttl_s <= MAX_CACHE_TTL_S:
            raise ValueError(f"cache_ttl_s must be between 0 and {MAX_CACHE_TTL_S}")
        self.backend = backend
        self.cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, Record]] = {}
        self._hooks: list[Hook] = []
        self._seed: bytes | None = None

    def add_hook(self, hook: Hook) -> None:
        """Call ``hook(actor, action, target, before, after)`` after every change."""
        self._hooks.append(hook)

    async def close(self) -> None:
        await self.backend.close()

    # -- lookups (the gateway) -------------------------------------------------------

    async def api_key(self, key_id: str) -> ApiKey | None:
        record = await self._get(API_KEYS, key_id)
        return None if record is None else ApiKey.from_record(record)

    async def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        if mechanism not in SCRAM_HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        record = await self._get(mechanism, user)
        return None if record is None else ScramCredential.from_record(record)

    async def mock_seed(self) -> bytes:
        """A random value shared by all instances (created once), for fake SCRAM salts."""
        if self._seed is None:
            record = await self.backend.get(META, MOCK_SEED)
            if record is None:
                await self.backend.insert(META, MOCK_SEED, {"hex": secrets.token_hex(32)})
                record = await self.backend.get(META, MOCK_SEED)
            if record is None or not isinstance(record.get("hex"), str):
                raise StoreError("the credential store has no usable SCRAM mock seed")
            self._seed = bytes.fromhex(record["hex"])
        return self._seed

    async def _get(self, table: str, key: str) -> Record | None:
        if self.cache_ttl_s > 0:
            hit = self._cache.get((table, key))
            if hit is not None and hit[0] > self._clock():
                return hit[1]
        record = await self.backend.get(table, key)
        if record is not None and self.cache_ttl_s > 0:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[(table, key)] = (self._clock() + self.cache_ttl_s, record)
        return record

    # -- API keys ----------------------------------------------------------------------

    async def create_api_key(
        self,
        *,
        principal: str,
        tenant: str,
        actor: str,
        description: str = "",
        expires_at: float | None = None,
    ) -> tuple[ApiKey, str]:
        """A new active key and its secret; the secret is never stored nor shown again."""
        check_principal(principal)
        check_tenant(tenant)
        if len(description) > DESCRIPTION_MAX or any(ord(c) < 32 for c in description):
            raise InvalidCredential(
                f"a description is at most {DESCRIPTION_MAX} printable characters"
            )
        secret = new_secret()
        secret_hash = await asyncio.to_thread(hash_secret, secret)
        for _ in range(5):
            key = ApiKey(
                key_id=new_key_id(),
                principal=principal,
                tenant=tenant,
                secret_hash=secret_hash,
                description=description,
                expires_at=expires_at,
            )
            if await self.backend.insert(API_KEYS, key.key_id, key.to_record()):
                self._changed(actor, "apikey.create", f"apikey:{key.key_id}", None, key.public())
                return key, secret
        raise StoreError("could not allocate a unique API key id")

    async def list_api_keys(self) -> list[ApiKey]:
        records = await self.backend.all(API_KEYS)
        keys = [ApiKey.from_record(record) for record in records.values()]
        return sorted(keys, key=lambda k: (k.tenant, k.created_at, k.key_id))

    async def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        """Revoke a key (idempotent); ``KeyError`` if there is no such key."""
        record = await self.backend.get(API_KEYS, key_id)
        if record is None:
            raise KeyError(key_id)
        key = ApiKey.from_record(record)
        if key.state == "revoked":
            return key
        revoked = key.revoked()
        await self.backend.put(API_KEYS, key_id, revoked.to_record())
        self._cache.pop((API_KEYS, key_id), None)
        self._changed(actor, "apikey.revoke", f"apikey:{key_id}", key.public(), revoked.public())
        return revoked

    # -- SCRAM -------------------------------------------------------------------------

    async def put_scram(
        self,
        user: str,
        mechanism: str,
        password: str,
        *,
        iterations: int,
        actor: str,
        tenant: str | None = None,
    ) -> ScramCredential:
        """Add or replace ``user``'s credential for ``mechanism``."""
        check_scram_user(user)
        if mechanism not in SCRAM_HASHES:
            raise InvalidCredential(f"mechanism must be one of {', '.join(SCRAM_HASHES)}")
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise InvalidCredential(
                f"iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}"
            )
        if not password:
            raise InvalidCredential("the password must not be empty")
        if tenant is not None:
            check_tenant(tenant)
        salt = new_scram_salt()
        stored_key, server_key = await asyncio.to_thread(
            scram_keys, mechanism, password, salt, iterations
        )
        credential = ScramCredential(
            user, mechanism, salt, iterations, stored_key, server_key, tenant=tenant
        )
        before = await self.backend.get(mechanism, user)
        await self.backend.put(mechanism, user, credential.to_record())
        self._cache.pop((mechanism, user), None)
        old = None if before is None else ScramCredential.from_record(before).public()
        action = "scram.add" if before is None else "scram.update"
        self._changed(actor, action, f"scram:{mechanism}:{user}", old, credential.public())
        return credential

    async def remove_scram(
        self, user: str, mechanisms: Iterable[str] = tuple(SCRAM_HASHES), *, actor: str
    ) -> list[ScramCredential]:
        """Remove ``user``'s credentials for ``mechanisms``; returns those that existed."""
        removed = []
        for mechanism in mechanisms:
            if mechanism not in SCRAM_HASHES:
                raise InvalidCredential(f"mechanism must be one of {', '.join(SCRAM_HASHES)}")
            record = await self.backend.get(mechanism, user)
            if record is None or not await self.backend.delete(mechanism, user):
                continue
            self._cache.pop((mechanism, user), None)
            credential = ScramCredential.from_record(record)
            removed.append(credential)
            target = f"scram:{mechanism}:{user}"
            self._changed(actor, "scram.remove", target, credential.public(), None)
        return removed

    async def list_scram(self) -> list[ScramCredential]:
        found: list[ScramCredential] = []
        for mechanism in SCRAM_HASHES:
            records = await self.backend.all(mechanism)
            found.extend(ScramCredential.from_record(r) for r in records.values())
        return sorted(found, key=lambda c: (c.user, c.mechanism))

    # -- hooks -------------------------------------------------------------------------

    def _changed(
        self, actor: str, action: str, target: str, before: Record | None, after: Record | None
    ) -> None:
        log.info(
            "credential change %s on %s by %s",
            action,
            target,
            actor,
            extra={"event": "credential_changed", "reason": action},
        )
        for hook in list(self._hooks):
            try:
                hook(actor, action, target, before, after)
            except Exception:
                log.exception("credential hook failed", extra={"event": "credential_hook_failed"})
