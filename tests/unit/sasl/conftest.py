"""Fixtures for the SASL and credential-store tests: stores on a file and on a real
Redis (Debian's redis-server on a free loopback port; missing, the tests fail)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from gateway.credentials import CredentialStore
from gateway.credentials.file_backend import FileBackend
from gateway.credentials.redis_backend import RedisBackend
from gateway.sasl import SaslServer
from tests.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


_prefixes = iter(range(1_000_000))


@pytest_asyncio.fixture(params=["file", "redis"], loop_scope="function")
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CredentialStore]:
    """An empty store on each backend."""
    if request.param == "file":
        backend: FileBackend | RedisBackend = FileBackend(tmp_path / "credentials.json")
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        backend = RedisBackend(redis.url, prefix=f"test{next(_prefixes)}")
    credentials = CredentialStore(backend)
    try:
        yield credentials
    finally:
        await credentials.close()


@pytest_asyncio.fixture(loop_scope="function")
async def file_store(tmp_path: Path) -> AsyncIterator[CredentialStore]:
    credentials = CredentialStore(FileBackend(tmp_path / "credentials.json"))
    yield credentials
    await credentials.close()


def sasl_server(store: CredentialStore, *mechanisms: str) -> SaslServer:
    return SaslServer(
        mechanisms or ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        store=store,
        scram_iterations=4096,
    )
