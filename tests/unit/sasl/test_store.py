"""The credential store on both backends (a JSON file; a real Redis)."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from gateway.credentials import (
    CredentialStore,
    CredentialStoreConfig,
    InvalidCredential,
    StoreError,
    open_store,
)
from gateway.credentials.file_backend import FileBackend
from gateway.credentials.hashing import verify_secret
from gateway.credentials.redis_backend import RedisBackend
from tests.redis_server import RedisServer, free_port

Change = tuple[str, str, str, Any, Any]


def second_instance(store: CredentialStore, cache_ttl_s: float = 0.0) -> CredentialStore:
    """Another gateway instance on the same shared store."""
    backend = store.backend
    if isinstance(backend, FileBackend):
        return CredentialStore(FileBackend(backend.path), cache_ttl_s=cache_ttl_s)
    assert isinstance(backend, RedisBackend)
    url = backend._client.connection_pool.connection_kwargs
    other = RedisBackend(f"redis://{url['host']}:{url['port']}/0", prefix=backend.prefix)
    return CredentialStore(other, cache_ttl_s=cache_ttl_s)


async def test_api_key_lifecycle_and_hooks(store: CredentialStore) -> None:
    changes: list[Change] = []
    store.add_hook(lambda *change: changes.append(change))
    key, secret = await store.create_api_key(
        principal="User:acme.app", tenant="acme", description="billing", actor="User:admin"
    )
    assert key.key_id.startswith("ak_") and secret.startswith("sk_")
    assert secret not in json.dumps(key.to_record())  # only the hash is stored
    assert verify_secret(secret.encode(), key.secret_hash)
    assert [k.key_id for k in await store.list_api_keys()] == [key.key_id]
    found = await store.api_key(key.key_id)
    assert found == key and found.usable()

    revoked = await store.revoke_api_key(key.key_id, actor="User:admin")
    assert revoked.state == "revoked" and revoked.revoked_at is not None
    again = await store.revoke_api_key(key.key_id, actor="User:admin")  # idempotent, no hook
    assert again.state == "revoked"
    with pytest.raises(KeyError):
        await store.revoke_api_key("ak_nope", actor="User:admin")

    assert [(c[0], c[1], c[2]) for c in changes] == [
        ("User:admin", "apikey.create", f"apikey:{key.key_id}"),
        ("User:admin", "apikey.revoke", f"apikey:{key.key_id}"),
    ]
    _, _, _, before, after = changes[1]
    assert before["state"] == "active" and after["state"] == "revoked"
    everything = json.dumps(changes)
    assert secret not in everything and "secret_hash" not in everything
    assert key.secret_hash.split("$")[-1] not in everything


async def test_scram_lifecycle_and_hooks(store: CredentialStore) -> None:
    changes: list[Change] = []
    store.add_hook(lambda *change: changes.append(change))
    await store.put_scram("alice", "SCRAM-SHA-256", "pw1", iterations=4096, actor="a")
    await store.put_scram("alice", "SCRAM-SHA-256", "pw2", iterations=8192, actor="a")
    await store.put_scram("alice", "SCRAM-SHA-512", "pw3", iterations=4096, actor="a")
    listed = [(c.user, c.mechanism, c.iterations) for c in await store.list_scram()]
    assert listed == [("alice", "SCRAM-SHA-256", 8192), ("alice", "SCRAM-SHA-512", 4096)]
    removed = await store.remove_scram("alice", actor="a")
    assert len(removed) == 2 and await store.list_scram() == []
    assert await store.remove_scram("alice", actor="a") == []
    assert [c[1] for c in changes] == [
        "scram.add",
        "scram.update",
        "scram.add",
        "scram.remove",
        "scram.remove",
    ]
    everything = json.dumps(changes)
    assert "stored_key" not in everything and "server_key" not in everything
    assert "pw1" not in everything


async def test_invalid_credentials_are_refused(file_store: CredentialStore) -> None:
    with pytest.raises(InvalidCredential):
        await file_store.create_api_key(principal="alice", tenant="t", actor="a")
    with pytest.raises(InvalidCredential):
        await file_store.create_api_key(principal="User:a", tenant="bad tenant", actor="a")
    with pytest.raises(InvalidCredential):
        await file_store.put_scram("u", "SCRAM-SHA-256", "pw", iterations=1000, actor="a")
    with pytest.raises(InvalidCredential):
        await file_store.put_scram("u", "SCRAM-SHA-1", "pw", iterations=4096, actor="a")
    with pytest.raises(InvalidCredential):
        await file_store.put_scram("u\n", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")


@pytest.mark.parametrize("tenant", ["acme.eu", "Acme", "acme_eu", "-acme", "acme-", "a" * 49, ""])
async def test_a_key_is_refused_for_a_name_no_tenant_can_have(
    file_store: CredentialStore, tenant: str
) -> None:
    # "acme.eu" would put the key's tenant prefix ("acme.eu.") inside tenant acme's
    with pytest.raises(InvalidCredential, match="1-48 of a-z"):
        await file_store.create_api_key(principal="User:a", tenant=tenant, actor="a")
    assert await file_store.list_api_keys() == []


async def test_scram_credentials_are_held_to_the_same_tenant_names(
    file_store: CredentialStore,
) -> None:
    with pytest.raises(InvalidCredential, match="1-48 of a-z"):
        await file_store.put_scram(
            "u", "SCRAM-SHA-256", "pw", iterations=4096, actor="a", tenant="acme.eu"
        )


async def test_revocation_reaches_another_instance_at_once(store: CredentialStore) -> None:
    key, _ = await store.create_api_key(principal="User:a", tenant="t", actor="a")
    other = second_instance(store)
    try:
        assert (await other.api_key(key.key_id)) is not None
        await store.revoke_api_key(key.key_id, actor="a")
        found = await other.api_key(key.key_id)
        assert found is not None and not found.usable()
        await store.put_scram("bob", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
        assert await other.scram("SCRAM-SHA-256", "bob") is not None
        await store.remove_scram("bob", actor="a")
        assert await other.scram("SCRAM-SHA-256", "bob") is None
        assert await other.mock_seed() == await store.mock_seed()  # same fake salts everywhere
    finally:
        await other.close()


async def test_a_short_cache_expires(store: CredentialStore) -> None:
    key, _ = await store.create_api_key(principal="User:a", tenant="t", actor="a")
    cached = second_instance(store, cache_ttl_s=0.3)
    try:
        assert (await cached.api_key(key.key_id)).usable()  # type: ignore[union-attr]
        await store.revoke_api_key(key.key_id, actor="a")
        await asyncio.sleep(0.35)
        assert not (await cached.api_key(key.key_id)).usable()  # type: ignore[union-attr]
    finally:
        await cached.close()
    with pytest.raises(ValueError):
        CredentialStore(store.backend, cache_ttl_s=1.5)


async def test_credential_file_is_private_and_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    store = CredentialStore(FileBackend(path))
    assert await store.list_api_keys() == []  # a missing file is an empty store
    await store.create_api_key(principal="User:a", tenant="t", actor="a")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    names = sorted(p.name for p in await asyncio.to_thread(lambda: list(tmp_path.iterdir())))
    assert names == ["creds.json", "creds.json.lock"]  # no temporary file left behind
    path.chmod(0o644)
    with pytest.raises(StoreError, match="chmod 600"):
        await CredentialStore(FileBackend(path)).list_api_keys()
    path.chmod(0o600)
    path.write_text("{not json")
    with pytest.raises(StoreError, match="not valid JSON"):
        await CredentialStore(FileBackend(path)).list_api_keys()


async def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    stores = [CredentialStore(FileBackend(path)) for _ in range(4)]
    await asyncio.gather(
        *(
            s.put_scram(f"user{i}-{j}", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
            for i, s in enumerate(stores)
            for j in range(5)
        )
    )
    assert len(await stores[0].list_scram()) == 20


async def test_unreachable_redis_is_a_store_error() -> None:
    store = open_store(CredentialStoreConfig(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    with pytest.raises(StoreError) as info:
        await store.api_key("ak_x")
    assert "127.0.0.1" not in str(info.value)
    await store.close()


async def test_open_store_from_config(tmp_path: Path, redis_server: RedisServer) -> None:
    file_store = open_store(CredentialStoreConfig(file=tmp_path / "c.json"))
    assert isinstance(file_store.backend, FileBackend)
    redis_store = open_store(CredentialStoreConfig(redis_url=redis_server.url, redis_prefix="x"))
    assert isinstance(redis_store.backend, RedisBackend)
    await redis_store.put_scram("u", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
    assert await redis_store.scram("SCRAM-SHA-256", "u") is not None
    await redis_store.close()
    assert await file_store.list_scram() == []
