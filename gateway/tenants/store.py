"""Where tenant records live: next to the credential store, in a file or in Redis.

The location follows ``sasl.credential_store``: with ``file: DIR/credentials.json``
the tenants are in ``DIR/tenants.json`` (0600, changed under an exclusive lock,
replaced atomically); with ``redis_url`` they are the hash
``<redis_prefix>:tenants`` in the same Redis. One record per tenant, JSON. Every
change names its ``actor`` and goes to the hooks as
``hook(actor, action, target, before, after)`` (``target`` = ``tenant:<name>``),
for the audit trail. The Redis URL may hold a password: it never reaches a log
line or an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..credentials.settings import CredentialStoreConfig
from ..fileutil import exclusive_lock, write_atomically
from .model import Tenant, TenantError

log = logging.getLogger("kgw.tenants")
FORMAT = 1
TIMEOUT_S = 2.0
Record = dict[str, Any]
Hook = Callable[[str, str, str, "Record | None", "Record | None"], None]


class TenantStoreError(TenantError):
    """The tenant store cannot be read or written right now."""


class Backend(Protocol):
    async def all(self) -> dict[str, Record]: ...

    async def put(self, name: str, record: Record) -> None: ...

    async def delete(self, name: str) -> bool: ...

    async def close(self) -> None: ...

    def watched_files(self) -> list[Path]:
        """The files a change of the store shows in; [] when only the store can tell."""
        ...


class TenantStore:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._hooks: list[Hook] = []

    def add_hook(self, hook: Hook) -> None:
        self._hooks.append(hook)

    async def close(self) -> None:
        await self.backend.close()

    def watched_files(self) -> list[Path]:
        """The files a change of the store shows in (none: ask the store itself)."""
        return self.backend.watched_files()

    async def all(self) -> dict[str, Tenant]:
        records = await self.backend.all()
        return {name: Tenant.from_record(record) for name, record in records.items()}

    async def get(self, name: str) -> Tenant | None:
        return (await self.all()).get(name)

    async def put(self, tenant: Tenant, *, actor: str, action: str) -> None:
        before = await self.get(tenant.name)
        await self.backend.put(tenant.name, tenant.to_record())
        self._changed(actor, action, tenant.name, before, tenant)

    async def remove(self, name: str, *, actor: str) -> bool:
        before = await self.get(name)
        removed = await self.backend.delete(name)
        if removed:
            self._changed(actor, "tenant.purge", name, before, None)
        return removed

    def _changed(
        self, actor: str, action: str, name: str, before: Tenant | None, after: Tenant | None
    ) -> None:
        log.info(
            "tenant change %s on %s by %s",
            action,
            name,
            actor,
            extra={"event": "tenant_changed", "reason": action, "subject": name},
        )
        old = None if before is None else before.to_record()
        new = None if after is None else after.to_record()
        for hook in list(self._hooks):
            try:
                hook(actor, action, f"tenant:{name}", old, new)
            except Exception:
                log.exception("tenant hook failed", extra={"event": "tenant_hook_failed"})


def tenant_file(config: CredentialStoreConfig) -> Path | None:
    return None if config.file is None else config.file.with_name("tenants.json")


def open_tenant_store(config: CredentialStoreConfig) -> TenantStore:
    """The tenant store beside the credential store ``config`` names."""
    path = tenant_file(config)
    if path is not None:
        return TenantStore(FileTenantBackend(path))
    assert config.redis_url is not None
    return TenantStore(RedisTenantBackend(config.redis_url, f"{config.redis_prefix}:tenants"))


class FileTenantBackend:
    """``tenants.json``: ``{"format": 1, "tenants": {name: record}}``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._signature: tuple[int, int, int, int] | None = None
        self._data: dict[str, Record] = {}

    def watched_files(self) -> list[Path]:
        return [self.path]

    async def all(self) -> dict[str, Record]:
        return await asyncio.to_thread(self._read)

    async def put(self, name: str, record: Record) -> None:
        def change(data: dict[str, Record]) -> None:
            data[name] = record

        await asyncio.to_thread(self._mutate, change)

    async def delete(self, name: str) -> bool:
        return await asyncio.to_thread(self._mutate, lambda data: data.pop(name, None) is not None)

    async def close(self) -> None:
        return None

    def _read(self) -> dict[str, Record]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._signature, self._data = None, {}
            return {}
        except OSError as exc:
            raise TenantStoreError(f"cannot read {self.path}: {exc.strerror}") from None
        signature = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
        if signature != self._signature:
            if stat.S_IMODE(st.st_mode) & 0o077:
                raise TenantStoreError(
                    f"the tenant file {self.path} is accessible by group or others; chmod 600 it"
                )
            self._data = self._parse()
            self._signature = signature
        return {name: dict(record) for name, record in self._data.items()}

    def _parse(self) -> dict[str, Record]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TenantStoreError(f"cannot read {self.path}: {exc.strerror}") from None
        except ValueError:
            raise TenantStoreError(f"the tenant file {self.path} is not valid JSON") from None
        tenants = raw.get("tenants") if isinstance(raw, dict) else None
        if (
            not isinstance(raw, dict)
            or raw.get("format") != FORMAT
            or not isinstance(tenants, dict)
        ):
            raise TenantStoreError(f"the tenant file {self.path} is not in format {FORMAT}")
        return {str(k): v for k, v in tenants.items() if isinstance(v, dict)}

    def _mutate(self, change: Callable[[dict[str, Record]], Any]) -> Any:
        with self._locked():
            self._signature = None  # re-read under the lock
            data = self._read()
            result = change(data)
            self._write(data)
            self._signature = None
            return result

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return exclusive_lock(self.lock_path, TenantStoreError)

    def _write(self, data: dict[str, Record]) -> None:
        text = json.dumps({"format": FORMAT, "tenants": data}, indent=1, sort_keys=True)
        try:
            write_atomically(self.path, text + "\n", mode=0o600)
        except OSError as exc:
            raise TenantStoreError(f"cannot write {self.path}: {exc.strerror}") from None


class RedisTenantBackend:
    """One hash, field = tenant name, value = the record as JSON."""

    def __init__(self, url: str, key: str) -> None:
        import redis.asyncio as aioredis

        self.key = key
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
        )

    def watched_files(self) -> list[Path]:
        return []  # a change shows in Redis only: the watch polls the store

    async def all(self) -> dict[str, Record]:
        raw = await self._call("hgetall", self.key)
        found: dict[str, Record] = {}
        for name, text in raw.items():
            try:
                record = json.loads(text)
            except ValueError:
                raise TenantStoreError("unreadable record in the Redis tenant store") from None
            if isinstance(record, dict):
                found[name.decode() if isinstance(name, bytes) else str(name)] = record
        return found

    async def put(self, name: str, record: Record) -> None:
        await self._call("hset", self.key, name, json.dumps(record, sort_keys=True))

    async def delete(self, name: str) -> bool:
        return bool(await self._call("hdel", self.key, name))

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, command: str, *args: str) -> Any:
        from redis.exceptions import RedisError

        try:
            return await getattr(self._client, command)(*args)
        except (RedisError, OSError) as exc:
            reason = type(exc).__name__
            raise TenantStoreError(f"the Redis tenant store is unavailable ({reason})") from None
