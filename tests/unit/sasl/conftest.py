"""Fixtures for the SASL and credential-store tests: stores on a file and on a real
Redis (Debian's redis-server on a free loopback port; missing, the tests fail)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from gateway.credentials import CredentialStore
from gateway.credentials.file_backend import FileBackend
from gateway.credentials.redis_backend import RedisBackend
from gateway.sasl import SaslServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(binary).exists():
            raise RuntimeError("redis-server is not installed (Debian package redis-server)")
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


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
