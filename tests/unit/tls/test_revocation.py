"""Which established client certificates a reloaded CRL revokes (decision 0029): the
pure decision, and the runtime sweep that closes those connections and no others."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography import x509

from gateway.identity import ClientIdentity
from gateway.runtime.revoked_certs import CLOSE_REASON, close_revoked_certificates
from gateway.tls.ca import CertificateAuthority, parse_subject
from gateway.tls.material import Material, load_crl
from gateway.tls.revocation import CertRef, revoked_among

from .conftest import Pki


def ref(ca: CertificateAuthority, name: str) -> CertRef:
    """The CertRef of an issued certificate, read from its PEM file."""
    pem = (ca.dir / ca.find(name).cert).read_bytes()
    return CertRef.of(x509.load_pem_x509_certificates(pem)[0])


@pytest.fixture(scope="module")
def live(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """A CA of its own, with two clients, one of which is then revoked."""
    ca = CertificateAuthority.create(
        tmp_path_factory.mktemp("live") / "live", parse_subject("CN=Live CA,O=Acme")
    )
    for name in ("keeper", "leaker"):
        ca.issue(name, "client", parse_subject(f"CN={name},O=Acme"))
    ca.write_crl()
    return ca


def crl(ca: CertificateAuthority) -> x509.CertificateRevocationList:
    return load_crl(ca.crl_path, [ca.certificate])


def test_only_the_revoked_serial_of_that_issuer(live: CertificateAuthority, pki: Pki) -> None:
    keeper, leaker = ref(live, "keeper"), ref(live, "leaker")
    assert revoked_among([keeper, leaker], [crl(live)]) == {}
    live.revoke("leaker", "key_compromise")
    found = revoked_among([keeper, leaker], [crl(live), crl(pki.tenant)])
    assert list(found) == [leaker]
    assert found[leaker].reason == "key_compromise"
    # the same serial under another issuer is another certificate
    twin = CertRef(leaker.serial, pki.tenant.certificate.subject.rfc4514_string())
    assert revoked_among([twin], [crl(live), crl(pki.tenant)]) == {}
    assert revoked_among([leaker], []) == {}
    # the tenant CRL revokes its own "revoked" certificate, found by serial
    assert list(revoked_among([ref(pki.tenant, "revoked"), ref(pki.tenant, "app")],
                              [crl(pki.tenant)])) == [ref(pki.tenant, "revoked")]  # fmt: skip


def test_cert_ref_names_the_certificate_as_kgw_certs_does(pki: Pki) -> None:
    app = ref(pki.tenant, "app")
    assert app.serial_hex == pki.tenant.find("app").serial
    assert app.issuer == "CN=Tenant CA,O=Acme"
    assert app.subject == "CN=app1,OU=Payments,O=Acme"


# -- the runtime sweep, with stand-ins for the gateway and its connections ------------


@dataclass(eq=False)
class FakeConn:
    listener: object
    identity: ClientIdentity
    conn_id: str
    peer: str = "127.0.0.1:5000"
    closed: bool = False
    reasons: list[tuple[str, str]] = field(default_factory=list)

    def close(self, reason: str, side: str) -> None:
        self.closed = True
        self.reasons.append((reason, side))


def conn(listener: object, cert: CertRef | None, conn_id: str) -> FakeConn:
    identity = ClientIdentity(listener="mtls", host="127.0.0.1", port=5000)
    if cert is not None:
        identity.cert_serial, identity.cert_issuer = cert.serial, cert.issuer
        identity.cert_subject = cert.subject
    return FakeConn(listener, identity, conn_id)


class FakeListener:
    class config:  # stands in for ListenerConfig
        name = "mtls"


def test_the_sweep_closes_revoked_connections_of_its_listener_only(
    pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    listener, other_listener = FakeListener(), FakeListener()
    revoked, good = ref(pki.tenant, "revoked"), ref(pki.tenant, "app")
    conns = [
        conn(listener, revoked, "c1"),
        conn(listener, revoked, "c2"),  # a second connection of the same certificate
        conn(listener, good, "c3"),
        conn(listener, None, "c4"),  # no client certificate
        conn(other_listener, revoked, "c5"),  # another listener: its own CRLs decide
    ]
    gateway: Any = type("G", (), {"connections": set(conns)})()
    material = Material(None, None, None, [], (crl(pki.tenant),))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, "kgw.tls"):
        assert close_revoked_certificates(gateway, listener, material) == 2  # type: ignore[arg-type]
    assert [c.conn_id for c in conns if c.closed] == ["c1", "c2"]
    assert conns[0].reasons == [(CLOSE_REASON, "gateway")]
    records = [r for r in caplog.records if getattr(r, "event", "") == "certificate_revoked"]
    assert sorted(r.conn for r in records) == ["c1", "c2"]  # type: ignore[attr-defined]
    record: Any = records[0]
    assert record.serial == revoked.serial_hex and record.subject == "CN=revoked"
    assert record.reason == "key_compromise" and record.peer == "127.0.0.1:5000"
    # material without CRLs closes nothing
    assert close_revoked_certificates(gateway, other_listener, Material(None, None, None, [])) == 0  # type: ignore[arg-type]
    assert not conns[4].closed
