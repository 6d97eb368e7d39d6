"""A handshake that ran with the previous TLS material while a CRL revoking its
certificate was loaded is refused when it completes (decision 0029): the sweep of
established connections at that reload could not see it yet. In memory: a real
OpenSSL client against ``TlsServerProtocol`` over a stand-in socket transport."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

import pytest

from gateway.identity import ClientIdentity
from gateway.tls.accept import TlsAcceptor
from gateway.tls.ca import CertificateAuthority, parse_subject
from gateway.tls.settings import ClientCaConfig, ListenerTlsConfig

from .conftest import Pki


class RawTransport:
    """What the TLS protocol writes to: the socket, recorded."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written += data

    def take(self) -> bytes:
        out, self.written = bytes(self.written), bytearray()
        return out

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    abort = close


class Inner:
    """The plaintext side: records whether the Kafka layer was ever reached."""

    def __init__(self) -> None:
        self.conn_id = "c1"
        self.identity = ClientIdentity(listener="mtls", host="", port=0)
        self.node_id: int | None = None
        self.started = False
        self.outcomes: list[str | None] = []

    def connection_made(self, transport: Any) -> None:
        self.started = True

    def tls_done(self, reason: str | None) -> None:
        self.outcomes.append(reason)

    def data_received(self, data: bytes) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...


def handshake(acceptor: TlsAcceptor, client: ssl.SSLContext, revoke: Any) -> Inner:
    """Start the handshake, call ``revoke()`` midway, let it finish."""
    inner = Inner()
    raw = RawTransport()
    protocol = acceptor.protocol(inner)
    protocol.connection_made(raw)  # type: ignore[arg-type]
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client.wrap_bio(incoming, outgoing, server_hostname="localhost")
    for step in range(10):
        with contextlib.suppress(ssl.SSLWantReadError):
            obj.do_handshake()
        if step == 1:
            revoke()  # the server has answered the ClientHello with the old context
        data = outgoing.read()
        if data:
            protocol.data_received(data)
        incoming.write(raw.take())
        if inner.started or raw.closed:
            break
    return inner


@pytest.fixture
def setup(pki: Pki, tmp_path: Any) -> tuple[CertificateAuthority, TlsAcceptor, ssl.SSLContext]:
    ca = CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=Race CA,O=Acme"))
    ca.issue("racer", "client", parse_subject("CN=racer,O=Acme"))
    ca.write_crl()
    cert, key = pki.pair(pki.server, "gw")
    config = ListenerTlsConfig(
        cert_file=cert,
        key_file=key,
        client_auth="required",
        client_cas=[ClientCaConfig(ca_file=ca.cert_path, crl_file=ca.crl_path)],
        watch_interval_s=0,
    )
    client = ssl.create_default_context(cafile=str(pki.server.cert_path))
    client.load_cert_chain(ca.dir / "issued" / "racer.pem", ca.dir / "issued" / "racer.key")
    return ca, TlsAcceptor("mtls", config, None, "localhost"), client


def test_revoked_during_the_handshake_is_refused(
    setup: tuple[CertificateAuthority, TlsAcceptor, ssl.SSLContext],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ca, acceptor, client = setup

    def revoke() -> None:
        ca.revoke("racer", "key_compromise")
        assert acceptor.material.reload("test")

    with caplog.at_level(logging.WARNING, "kgw.tls"):
        inner = asyncio.run(_run(acceptor, client, revoke))
    assert not inner.started, "the Kafka layer was reached with a revoked certificate"
    assert inner.outcomes == ["cert_revoked"]
    assert [getattr(r, "reason", None) for r in caplog.records] == ["cert_revoked"]


def test_a_reload_that_revokes_nothing_lets_the_handshake_through(
    setup: tuple[CertificateAuthority, TlsAcceptor, ssl.SSLContext],
) -> None:
    ca, acceptor, client = setup

    def reload() -> None:
        ca.write_crl()
        assert acceptor.material.reload("test")

    inner = asyncio.run(_run(acceptor, client, reload))
    assert inner.started and inner.outcomes == [None]
    assert inner.identity.cert_serial == int(ca.find("racer").serial, 16)
    assert inner.identity.cert_issuer == "CN=Race CA,O=Acme"
    assert inner.identity.cert_subject == "CN=racer,O=Acme"


async def _run(acceptor: TlsAcceptor, client: ssl.SSLContext, midway: Any) -> Inner:
    return handshake(acceptor, client, midway)
