"""The TLS data path (issue 16): large writes are encrypted in slices without a copy
of the plaintext, small frames written together are joined, and decrypted bytes
handed to the Kafka layer as a view of a shared buffer are copied by the frame
reader before the buffer is reused. In memory: a real OpenSSL client against
``TlsServerProtocol`` over a stand-in socket transport."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import struct
from typing import Any

import pytest

from gateway.identity import ClientIdentity
from gateway.protocol.framing import FrameReader
from gateway.tls.accept import TlsAcceptor, TlsServerProtocol
from gateway.tls.layer import READ_SIZE, WRITE_SLICE
from gateway.tls.settings import ListenerTlsConfig

from .conftest import Pki
from .test_accept_revocation import RawTransport


class Writes(RawTransport):
    """Also counts the socket writes."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def write(self, data: bytes) -> None:
        self.count += 1
        super().write(data)


class Framed:
    """The plaintext side: cuts frames as ``ClientConnection`` does."""

    def __init__(self) -> None:
        self.conn_id = "c1"
        self.identity = ClientIdentity(listener="tls", host="", port=0)
        self.node_id: int | None = None
        self.reader = FrameReader(64 << 20)
        self.frames: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def tls_done(self, reason: str | None) -> None: ...

    def data_received(self, data: bytes | memoryview) -> None:
        self.frames += self.reader.feed(data)

    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...


class Pair:
    def __init__(self, pki: Pki) -> None:
        cert, key = pki.pair(pki.server, "gw")
        acceptor = TlsAcceptor("tls", ListenerTlsConfig(cert_file=cert, key_file=key), None, "x")
        self.inner = Framed()
        self.raw = Writes()
        self.protocol: TlsServerProtocol = acceptor.protocol(self.inner)  # type: ignore[arg-type]
        self.protocol.connection_made(self.raw)  # type: ignore[arg-type]
        context = ssl.create_default_context(cafile=str(pki.server.cert_path))
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")
        for _ in range(10):
            with contextlib.suppress(ssl.SSLWantReadError):
                self.client.do_handshake()
            data = self.outgoing.read()
            if data:
                self.protocol.data_received(data)
            self.incoming.write(self.raw.take())
            if self.protocol.app is not None:
                break
        assert self.protocol.app is not None

    def client_reads(self) -> bytes:
        self.incoming.write(self.raw.take())
        out = bytearray()
        with contextlib.suppress(ssl.SSLWantReadError):
            while True:
                chunk = self.client.read(1 << 20)
                if not chunk:
                    break
                out += chunk
        return bytes(out)


def frame_of(size: int) -> bytes:
    return struct.pack(">i", size - 4) + os.urandom(size - 4)


async def _pair(pki: Pki) -> Pair:
    return Pair(pki)  # the handshake timer needs a running loop


@pytest.fixture
def pair(pki: Pki) -> Pair:
    loop = asyncio.new_event_loop()
    try:
        yield loop.run_until_complete(_pair(pki))  # type: ignore[misc]
    finally:
        loop.close()


def test_a_large_write_goes_out_whole_in_slices(pair: Pair) -> None:
    big = frame_of(3 * WRITE_SLICE + 12345)
    pair.raw.count = 0
    pair.protocol.app.write(big)  # type: ignore[union-attr]
    assert pair.raw.count == 4  # one socket write per slice: no multi-megabyte buffers
    assert pair.client_reads() == big


def test_writelines_keeps_the_order_of_small_and_large_frames(pair: Pair) -> None:
    frames = [frame_of(100), frame_of(200), frame_of(2 * WRITE_SLICE), frame_of(50)]
    frames += [frame_of(WRITE_SLICE // 3) for _ in range(5)]
    pair.raw.count = 0
    pair.protocol.app.writelines(frames)  # type: ignore[union-attr]
    assert pair.client_reads() == b"".join(frames)
    assert pair.raw.count < len(frames) + 2  # small frames were joined


def test_memoryview_and_bytearray_writes(pair: Pair) -> None:
    data = frame_of(WRITE_SLICE + 7)
    pair.protocol.app.write(memoryview(data))  # type: ignore[union-attr]
    pair.protocol.app.write(bytearray(data[:100]))  # type: ignore[union-attr]
    assert pair.client_reads() == data + data[:100]


def test_received_frames_survive_the_reuse_of_the_read_buffer(pair: Pair) -> None:
    frames = [frame_of(n) for n in (10, 70_000, 300, READ_SIZE + 5000, 20, 1000)]
    for item in frames:  # one record stream, fed to the server in uneven pieces
        pair.client.write(item)
    ciphertext = pair.outgoing.read()
    for start in range(0, len(ciphertext), 48_000):
        pair.protocol.data_received(ciphertext[start : start + 48_000])
    assert pair.inner.frames == frames
    assert all(isinstance(f, bytes) for f in pair.inner.frames)
