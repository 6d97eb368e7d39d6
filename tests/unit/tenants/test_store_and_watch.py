from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gateway.tenants.model import Tenant
from gateway.tenants.store import FileTenantBackend, TenantStore, TenantStoreError
from gateway.tenants.watch import TenantWatch


async def test_file_store_roundtrip_hooks_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    store = TenantStore(FileTenantBackend(path))
    seen: list[tuple[str, str, str]] = []
    store.add_hook(
        lambda actor, action, target, before, after: seen.append((actor, action, target))
    )
    assert await store.all() == {}
    tenant = Tenant("acme", "bronze", "acme.")
    await store.put(tenant, actor="test", action="tenant.create")
    assert await store.get("acme") == tenant
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert seen == [("test", "tenant.create", "tenant:acme")]
    other = TenantStore(FileTenantBackend(path))  # another process's view
    await other.put(tenant.with_state("suspended"), actor="test", action="tenant.suspend")
    assert (await store.get("acme")).state == "suspended"  # type: ignore[union-attr]
    path.chmod(0o644)
    with pytest.raises(TenantStoreError, match="chmod 600"):
        await TenantStore(FileTenantBackend(path)).all()


async def test_watch_reports_blocked_tenants_and_survives_a_bad_store(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    store = TenantStore(FileTenantBackend(path))
    await store.put(Tenant("acme", "bronze", "acme."), actor="t", action="tenant.create")
    await store.put(Tenant("globex", "bronze", "globex.", state="suspended"), actor="t", action="x")
    watch = TenantWatch(TenantStore(FileTenantBackend(path)), interval_s=0.05)
    calls: list[frozenset[str]] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop, calls.append))
    await asyncio.sleep(0.1)
    assert watch.blocked("globex") and not watch.blocked("acme") and not watch.blocked(None)
    await store.put(
        (await store.get("acme")).with_state("deleted"),  # type: ignore[union-attr]
        actor="t",
        action="tenant.delete",
    )
    await asyncio.sleep(0.2)
    assert calls[-1] == frozenset({"acme", "globex"})
    path.write_text("not json")
    path.chmod(0o600)
    await asyncio.sleep(0.2)
    assert not watch.available and watch.blocked("acme")  # the last known state stays
    stop.set()
    await asyncio.wait_for(task, 2)
