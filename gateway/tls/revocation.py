"""Which client certificates a set of CRLs revokes: the policy behind closing the
established connections of a revoked certificate (decision 0029). No I/O.

A connection keeps only what names its certificate (``CertRef``: serial and issuer,
plus the subject for the logs), never the certificate itself. A certificate is
revoked when the CRL of its issuer (same issuer name; ``material.load_crl`` has
checked that its CA signed it) lists its serial — what OpenSSL checks at the
handshake with ``VERIFY_CRL_CHECK_LEAF``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509


@dataclass(frozen=True, slots=True)
class CertRef:
    """What identifies a client certificate: its serial and its issuer's DN (RFC 4514)."""

    serial: int
    issuer: str
    subject: str = ""

    @property
    def serial_hex(self) -> str:
        """As ``kgw certs list``/``revoke`` show it."""
        return f"{self.serial:x}"

    @classmethod
    def of(cls, cert: x509.Certificate) -> CertRef:
        return cls(cert.serial_number, cert.issuer.rfc4514_string(), cert.subject.rfc4514_string())


@dataclass(frozen=True, slots=True)
class Revocation:
    """Why and since when a certificate is revoked, from its CRL entry."""

    reason: str  # a CRLReason name ("key_compromise"), "unspecified" when none is given
    revoked_at: datetime.datetime


def _reason(entry: x509.RevokedCertificate) -> str:
    try:
        flag = entry.extensions.get_extension_for_class(x509.CRLReason).value.reason
    except x509.ExtensionNotFound:
        return "unspecified"
    return str(flag.name)


def revoked_among(
    certs: Iterable[CertRef], crls: Sequence[x509.CertificateRevocationList]
) -> dict[CertRef, Revocation]:
    """The certificates among ``certs`` that one of ``crls`` revokes, with why."""
    by_issuer: dict[str, list[x509.CertificateRevocationList]] = {}
    for crl in crls:
        by_issuer.setdefault(crl.issuer.rfc4514_string(), []).append(crl)
    found: dict[CertRef, Revocation] = {}
    for cert in certs:
        for crl in by_issuer.get(cert.issuer, ()):
            entry = crl.get_revoked_certificate_by_serial_number(cert.serial)
            if entry is not None:
                found[cert] = Revocation(_reason(entry), entry.revocation_date_utc)
                break
    return found
