"""The client certificates ``kgw tenant`` issues (``create --cert``) and revokes
(``delete --ca-dir``), from a tenant CA made with ``kgw certs init-ca``."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from . import bundle
from .model import Tenant, TenantError

if TYPE_CHECKING:
    from .onboard import CertificateRequest


def issue_client_certificate(
    request: CertificateRequest, name: str, principal: str
) -> tuple[bundle.ClientCertificate, dict[str, bytes], str]:
    """Issue a client certificate (CN = the principal's name) and its PKCS#12 export."""
    import tempfile

    from ..tls.ca import CaError, CertificateAuthority, parse_subject

    try:
        ca = CertificateAuthority(request.ca_dir, request.ca_password)
        cert_name = f"tenant-{name}-{secrets.token_hex(3)}"
        user = principal.partition(":")[2]
        entry = ca.issue(cert_name, "client", parse_subject(f"CN={user}"), days=request.days)
        password = secrets.token_urlsafe(18)
        with tempfile.TemporaryDirectory() as tmp:
            p12 = ca.export_pkcs12(cert_name, Path(tmp) / "client.p12", password.encode())
            p12_bytes = p12.read_bytes()
    except CaError as exc:
        raise TenantError(f"client certificate: {exc}") from None
    assert entry.key is not None
    binary = {
        "client.p12": p12_bytes,
        "client.pem": (request.ca_dir / entry.cert).read_bytes(),
        "client.key": (request.ca_dir / entry.key).read_bytes(),
    }
    cert = bundle.ClientCertificate("client.p12", password, "client.pem", "client.key")
    return cert, binary, cert_name


def revoke_certificates(
    tenant: Tenant, ca_dir: Path | None, ca_password: bytes | None
) -> list[str]:
    if not tenant.certificates or ca_dir is None:
        return []
    from ..tls.ca import CaError, CertificateAuthority

    revoked = []
    ca = CertificateAuthority(ca_dir, ca_password)
    for cert_name in tenant.certificates:
        with contextlib.suppress(CaError):
            ca.revoke(cert_name, "cessation_of_operation")
            revoked.append(cert_name)
    return revoked
