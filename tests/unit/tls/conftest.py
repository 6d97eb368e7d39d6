"""A throwaway PKI made with the project's own CA tooling, for the TLS unit tests."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.tls.ca import CertificateAuthority, parse_san, parse_subject, utcnow

DAY = datetime.timedelta(days=1)


@dataclass
class Pki:
    root: Path
    server: CertificateAuthority  # issues the gateway's certificate
    tenant: CertificateAuthority  # a tenant's CA, trusted by the listener
    rogue: CertificateAuthority  # a CA nobody trusts

    def pair(self, ca: CertificateAuthority, name: str) -> tuple[Path, Path]:
        return ca.dir / "issued" / f"{name}.pem", ca.dir / "issued" / f"{name}.key"


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    server = CertificateAuthority.create(root / "gateway", parse_subject("CN=Gateway CA,O=KaaS"))
    tenant = CertificateAuthority.create(root / "tenant", parse_subject("CN=Tenant CA,O=Acme"))
    rogue = CertificateAuthority.create(root / "rogue", parse_subject("CN=Rogue CA"))
    server.issue("gw", "server", parse_subject("CN=gateway"), [parse_san("localhost"),
                 parse_san("127.0.0.1"), parse_san("*.kafka.test")])  # fmt: skip
    tenant.issue(
        "app",
        "client",
        parse_subject("CN=app1,OU=Payments,O=Acme"),
        [parse_san("URI:spiffe://acme/payments/app1"), parse_san("EMAIL:app1@acme.test")],
    )
    now = utcnow()
    tenant.issue("expired", "client", parse_subject("CN=expired"),
                 not_before=now - 10 * DAY, not_after=now - DAY)  # fmt: skip
    tenant.issue("future", "client", parse_subject("CN=future"),
                 not_before=now + DAY, not_after=now + 10 * DAY)  # fmt: skip
    tenant.issue("revoked", "client", parse_subject("CN=revoked"))
    tenant.revoke("revoked", "key_compromise")
    rogue.issue("intruder", "client", parse_subject("CN=intruder"))
    return Pki(root, server, tenant, rogue)
