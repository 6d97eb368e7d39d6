"""Server-side TLS as a sans-IO layer: handshakes with a real OpenSSL client, in memory.

Each refusal the issue names is produced by Python's ``ssl`` (OpenSSL) client
against ``ServerTls`` and must come out with its own ``reason``.
"""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

from gateway.tls.layer import HandshakeFailed, ServerTls, on_sni
from gateway.tls.material import server_material
from gateway.tls.settings import ClientCaConfig, ListenerTlsConfig

from .conftest import Pki


def listener(pki: Pki, client_auth: str = "required") -> ssl.SSLContext:
    cert, key = pki.pair(pki.server, "gw")
    ca = pki.tenant.dir
    config = ListenerTlsConfig(
        cert_file=cert,
        key_file=key,
        client_auth=client_auth,  # type: ignore[arg-type]
        client_cas=[ClientCaConfig(ca_file=ca / "ca.pem", crl_file=ca / "crl.pem")],
    )
    context = server_material(config).context
    context.sni_callback = on_sni
    return context


class Client:
    """An OpenSSL client over memory BIOs."""

    def __init__(self, ctx: ssl.SSLContext, server_name: str | None = "localhost") -> None:
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=server_name)

    def handshake_with(self, server: ServerTls) -> None:
        for _ in range(10):
            with contextlib.suppress(ssl.SSLWantReadError):
                self.obj.do_handshake()
            assert server.receive(self.outgoing.read()) == b"", "plaintext before the handshake"
            self.incoming.write(server.data_to_send())
            if server.established is not None:
                return
        raise AssertionError("handshake did not finish")


def client_ctx(pki: Pki, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.server.cert_path))
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


def test_mutual_tls_handshake_then_data_both_ways(pki: Pki) -> None:
    server = ServerTls(listener(pki))
    client = Client(client_ctx(pki, pki.pair(pki.tenant, "app")))
    client.handshake_with(server)
    est = server.established
    assert est is not None and est.version == "TLSv1.3" and est.server_name == "localhost"
    assert est.peer_certificate is not None
    assert est.peer_certificate.subject.rfc4514_string() == "CN=app1,OU=Payments,O=Acme"
    client.obj.write(b"\x00\x00\x00\x04ping")
    assert server.receive(client.outgoing.read()) == b"\x00\x00\x00\x04ping"
    server.send(b"pong" * 10000)
    client.incoming.write(server.data_to_send())
    received = b""
    while len(received) < 40000:
        received += client.obj.read(65536)
    assert received == b"pong" * 10000


def test_large_reads_span_the_read_buffer(pki: Pki) -> None:
    server = ServerTls(listener(pki))
    client = Client(client_ctx(pki, pki.pair(pki.tenant, "app")))
    client.handshake_with(server)
    payload = bytes(range(256)) * (3 * 4096 + 7)  # > 3 MiB, not a multiple of anything
    client.obj.write(payload)
    assert server.receive(client.outgoing.read()) == payload


def test_tls12_is_accepted(pki: Pki) -> None:
    ctx = client_ctx(pki, pki.pair(pki.tenant, "app"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    server = ServerTls(listener(pki))
    Client(ctx).handshake_with(server)
    assert server.established is not None and server.established.version == "TLSv1.2"
    assert "GCM" in server.established.cipher or "CHACHA20" in server.established.cipher


def test_client_certificate_optional_when_requested(pki: Pki) -> None:
    server = ServerTls(listener(pki, "requested"))
    Client(client_ctx(pki)).handshake_with(server)
    assert server.established is not None and server.established.peer_certificate is None


@pytest.mark.parametrize(
    ("ca", "name", "reason"),
    [
        ("tenant", "expired", "cert_expired"),
        ("tenant", "future", "cert_not_yet_valid"),
        ("tenant", "revoked", "cert_revoked"),
        ("rogue", "intruder", "unknown_ca"),
        (None, None, "no_client_cert"),
    ],
)
def test_bad_client_certificates_are_refused_with_reason(
    pki: Pki, ca: str | None, name: str | None, reason: str
) -> None:
    authority = {"tenant": pki.tenant, "rogue": pki.rogue}.get(ca or "")
    cert = pki.pair(authority, name) if authority is not None and name else None
    server = ServerTls(listener(pki, "required"))
    with pytest.raises(HandshakeFailed) as info:
        Client(client_ctx(pki, cert)).handshake_with(server)
    assert info.value.reason == reason
    assert server.data_to_send(), "an alert tells the client why"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_old_protocol_version_is_refused(pki: Pki) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(HandshakeFailed) as info:
        Client(ctx).handshake_with(ServerTls(listener(pki)))
    assert info.value.reason == "protocol_version"


def test_plaintext_kafka_is_refused_on_the_first_byte(pki: Pki) -> None:
    server = ServerTls(listener(pki))
    with pytest.raises(HandshakeFailed) as info:
        server.receive(b"\x00\x00\x00\x15\x00\x12\x00\x03")
    assert info.value.reason == "not_tls"
    assert "0x00" in info.value.detail


def test_client_that_does_not_trust_the_server(pki: Pki) -> None:
    client = Client(ssl.create_default_context(cafile=str(pki.rogue.cert_path)))
    server = ServerTls(listener(pki, "none"))
    with pytest.raises(ssl.SSLError):
        for _ in range(5):
            with contextlib.suppress(ssl.SSLWantReadError):
                client.obj.do_handshake()
            server.receive(client.outgoing.read())
            client.incoming.write(server.data_to_send())
    with pytest.raises(HandshakeFailed) as info:
        server.receive(client.outgoing.read())  # the client's alert
    assert info.value.reason == "client_rejected_server_cert"


def test_eof_during_handshake(pki: Pki) -> None:
    server = ServerTls(listener(pki))
    with pytest.raises(HandshakeFailed) as info:
        server.eof_received()
    assert info.value.reason == "peer_closed"


def test_sni_check_refuses_unknown_names(pki: Pki) -> None:
    allowed = {"kafka.test", "b1.kafka.test"}
    ctx = client_ctx(pki, pki.pair(pki.tenant, "app"))
    server = ServerTls(listener(pki), sni_check=lambda name: name in allowed)
    Client(ctx, "b1.kafka.test").handshake_with(server)
    assert server.established is not None and server.established.server_name == "b1.kafka.test"
    with pytest.raises(HandshakeFailed) as info:
        Client(ctx, "evil.kafka.test").handshake_with(
            ServerTls(listener(pki), sni_check=lambda name: name in allowed)
        )
    assert info.value.reason == "unknown_sni"
