"""The gateway's SASL credentials for the brokers, loaded once at start-up.

``UpstreamIdentity.load(config)`` reads ``password_file`` (one line; a trailing
newline is dropped) and fails with ``UpstreamCredentialError`` naming the file
and the reason, never the content. ``handshake()`` gives a fresh exchange for
each new broker connection. ``login(reader, writer)`` runs one over asyncio
streams, for the gateway's own control connections (metadata refresh).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import struct
from pathlib import Path

from .handshake import UpstreamHandshake
from .scram_client import UpstreamAuthError
from .settings import UpstreamSaslConfig

log = logging.getLogger("kgw.upstream")
MAX_PASSWORD_BYTES = 4096
MAX_SASL_FRAME = 1024 * 1024


class UpstreamCredentialError(Exception):
    """``upstream.sasl.password_file`` cannot be used (start-up)."""


def read_password(path: Path) -> str:
    """The password in ``path``: its first line, without the line ending."""
    try:
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            raw = handle.read(MAX_PASSWORD_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UpstreamCredentialError(
            f"upstream.sasl.password_file: cannot read {path}: {reason}"
        ) from None
    if len(raw) > MAX_PASSWORD_BYTES:
        raise UpstreamCredentialError(
            f"upstream.sasl.password_file: {path} is longer than {MAX_PASSWORD_BYTES} bytes"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UpstreamCredentialError(
            f"upstream.sasl.password_file: {path} is not UTF-8 text"
        ) from None
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise UpstreamCredentialError(f"upstream.sasl.password_file: {path} is empty")
    if "\0" in password:
        raise UpstreamCredentialError(f"upstream.sasl.password_file: {path} holds a NUL byte")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the upstream password file is readable by others than its owner",
            extra={"event": "upstream_password_file_mode", "path": str(path)},
        )
    return password


class UpstreamIdentity:
    """Mechanism, user name and password of the gateway's own broker login."""

    def __init__(self, config: UpstreamSaslConfig, password: str) -> None:
        self.config = config
        self._password = password

    @classmethod
    def load(cls, config: UpstreamSaslConfig) -> UpstreamIdentity:
        return cls(config, read_password(config.password_file))

    @property
    def mechanism(self) -> str:
        return self.config.mechanism

    @property
    def username(self) -> str:
        return self.config.username

    @property
    def timeout_s(self) -> float:
        return self.config.timeout_s

    def __repr__(self) -> str:  # never the password
        return f"UpstreamIdentity({self.mechanism}, {self.username!r})"

    def handshake(self) -> UpstreamHandshake:
        return UpstreamHandshake(self.config.mechanism, self.config.username, self._password)

    async def login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Authenticate a fresh stream connection; ``UpstreamAuthError`` if refused."""
        await drive_login(self.handshake(), reader, writer)


async def drive_login(
    exchange: UpstreamHandshake, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Run one SASL exchange over asyncio streams; ``UpstreamAuthError`` if refused."""
    frame: bytes | None = exchange.start()
    while frame is not None:
        writer.write(frame)
        await writer.drain()
        try:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            if not 0 <= size <= MAX_SASL_FRAME:
                raise UpstreamAuthError(f"SASL response of {size} bytes from the broker")
            payload = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise UpstreamAuthError(
                "the broker closed the connection during SASL authentication"
            ) from None
        frame = exchange.on_frame(struct.pack(">i", size) + payload)
