"""The certificate authority behind ``kgw certs``, built on ``cryptography``.

One directory per CA (``certs/<ca>/``)::

    ca.pem            the CA certificate (public: client_cas / truststores)
    ca.key            the CA private key (0600; optionally passphrase-encrypted)
    crl.pem           the current CRL, rewritten atomically on every revocation
    index.json        what was issued: serial, kind, subject, SANs, validity, revocation
    issued/<name>.pem certificate followed by the CA certificate (the chain to present)
    issued/<name>.key its private key (0600), absent when issued from a CSR
    issued/<name>.p12 PKCS#12 keystore for Java clients (``export``)

Private keys are created with mode 0600 (never world- or group-readable, never
overwritten) and are never printed. Files the gateway watches (``crl.pem``)
are replaced by rename, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

from .pem import (
    CaError,
    KeyType,
    PrivateKey,
    cert_pem,
    key_pem,
    new_key,
    parse_san,
    parse_subject,
    san_text,
    write_private,
    write_public,
)

__all__ = [
    "CaError", "CertificateAuthority", "Issued", "KeyType", "PrivateKey", "cert_pem",
    "find_cas", "key_pem", "new_key", "parse_san", "parse_subject", "san_text", "utcnow",
    "write_private", "write_public",
]  # fmt: skip

Kind = Literal["server", "client"]

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
CLOCK_SKEW = datetime.timedelta(minutes=5)
REASONS = {
    "unspecified": x509.ReasonFlags.unspecified,
    "key_compromise": x509.ReasonFlags.key_compromise,
    "ca_compromise": x509.ReasonFlags.ca_compromise,
    "affiliation_changed": x509.ReasonFlags.affiliation_changed,
    "superseded": x509.ReasonFlags.superseded,
    "cessation_of_operation": x509.ReasonFlags.cessation_of_operation,
}


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


@dataclass
class Issued:
    """One index entry."""

    name: str
    kind: Kind
    serial: str  # hex
    subject: str
    sans: list[str]
    not_before: str  # ISO 8601, UTC
    not_after: str
    cert: str  # path relative to the CA directory
    key: str | None
    issued_at: str
    revoked_at: str | None = None
    revocation_reason: str | None = None

    @property
    def expires(self) -> datetime.datetime:
        return datetime.datetime.fromisoformat(self.not_after)

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass
class Index:
    crl_number: int = 0
    issued: list[Issued] = field(default_factory=list)


class CertificateAuthority:
    """One CA directory. Nothing is held open; every call reads what it needs."""

    def __init__(self, directory: Path, password: bytes | None = None) -> None:
        self.dir = Path(directory)
        self._password = password
        if not (self.dir / "ca.pem").is_file():
            raise CaError(f"{self.dir}: no CA here (create one with kgw certs init-ca)")

    # -- files --------------------------------------------------------------

    @property
    def cert_path(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def key_path(self) -> Path:
        return self.dir / "ca.key"

    @property
    def crl_path(self) -> Path:
        return self.dir / "crl.pem"

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_path.read_bytes())

    def _key(self) -> PrivateKey:
        try:
            key = serialization.load_pem_private_key(
                self.key_path.read_bytes(), password=self._password
            )
        except OSError as exc:
            raise CaError(f"{self.key_path}: cannot read the CA key: {exc.strerror}") from None
        except (TypeError, ValueError):
            raise CaError(
                f"{self.key_path}: cannot open the CA key (wrong or missing passphrase?)"
            ) from None
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise CaError(f"{self.key_path}: unsupported key type")
        return key

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Index]:
        """The index, locked against concurrent ``kgw certs`` runs, saved on success."""
        with (self.dir / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            index = self.index()
            yield index
            write_public(self.dir / "index.json", _dump_index(index))

    def index(self) -> Index:
        path = self.dir / "index.json"
        if not path.is_file():
            return Index()
        data = json.loads(path.read_text())
        return Index(
            crl_number=int(data.get("crl_number", 0)),
            issued=[Issued(**item) for item in data.get("issued", [])],
        )

    # -- creation -------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        subject: x509.Name,
        days: int = 3650,
        key_type: KeyType = "ec",
        password: bytes | None = None,
        crl_days: int = 30,
    ) -> CertificateAuthority:
        directory = Path(directory)
        if (directory / "ca.pem").exists() or (directory / "ca.key").exists():
            raise CaError(f"{directory}: a CA already exists here")
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        key = new_key(key_type)
        now = utcnow()
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ski, critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        write_private(directory / "ca.key", key_pem(key, password))
        write_public(directory / "ca.pem", cert_pem(cert))
        (directory / "issued").mkdir(mode=0o700, exist_ok=True)
        ca = cls(directory, password)
        ca.write_crl(crl_days)
        return ca

    def issue(
        self,
        name: str,
        kind: Kind,
        subject: x509.Name,
        sans: Sequence[x509.GeneralName] = (),
        days: int = 397,
        key_type: KeyType = "ec",
        csr: x509.CertificateSigningRequest | None = None,
        also_client: bool = False,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
        key_password: bytes | None = None,
    ) -> Issued:
        """Issue a server or client certificate (a new key, or for a CSR's key)."""
        if not NAME.match(name):
            raise CaError(f"name {name!r}: use 1-64 of A-Z a-z 0-9 _ . -")
        if kind == "server" and not sans:
            raise CaError("a server certificate needs at least one SAN (every advertised host)")
        ca_cert, ca_key = self.certificate, self._key()
        with self._locked() as index:
            for old in index.issued:
                if old.name == name and old.active:
                    raise CaError(f"{name!r} is already issued and valid; revoke it first")
            key = None
            if csr is None:
                key = new_key(key_type)
                public_key = key.public_key()
            else:
                if not csr.is_signature_valid:
                    raise CaError("the CSR's signature does not verify")
                csr_key = csr.public_key()
                if not isinstance(csr_key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
                    raise CaError("the CSR's key type is not supported (EC or RSA)")
                public_key = csr_key
            now = utcnow()
            start = not_before or now - CLOCK_SKEW
            end = not_after or now + datetime.timedelta(days=days)
            cert = self._sign(
                ca_cert, ca_key, subject, public_key, sans, kind, also_client, start, end
            )
            self._archive(name)
            issued_dir = self.dir / "issued"
            key_rel = None
            if key is not None:
                write_private(issued_dir / f"{name}.key", key_pem(key, key_password))
                key_rel = f"issued/{name}.key"
            write_public(issued_dir / f"{name}.pem", cert_pem(cert, ca_cert))
            entry = Issued(
                name=name,
                kind=kind,
                serial=f"{cert.serial_number:x}",
                subject=cert.subject.rfc4514_string(),
                sans=[san_text(s) for s in sans],
                not_before=cert.not_valid_before_utc.isoformat(),
                not_after=cert.not_valid_after_utc.isoformat(),
                cert=f"issued/{name}.pem",
                key=key_rel,
                issued_at=now.isoformat(),
            )
            index.issued.append(entry)
        return entry

    @staticmethod
    def _sign(
        ca_cert: x509.Certificate,
        ca_key: PrivateKey,
        subject: x509.Name,
        public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
        sans: Sequence[x509.GeneralName],
        kind: Kind,
        also_client: bool,
        start: datetime.datetime,
        end: datetime.datetime,
    ) -> x509.Certificate:
        if end > ca_cert.not_valid_after_utc:
            raise CaError("the certificate would outlive its CA; give fewer days")
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if kind == "server" else []
        if kind == "client" or also_client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        is_rsa = isinstance(public_key, rsa.RSAPublicKey)
        ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_cert.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=is_rsa,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        return builder.sign(ca_key, hashes.SHA256())

    def _archive(self, name: str) -> None:
        """Keep a revoked certificate's files under a new name when its name is reused."""
        issued = self.dir / "issued"
        stamp = utcnow().strftime("%Y%m%dT%H%M%S")
        for suffix in (".pem", ".key", ".p12"):
            path = issued / f"{name}{suffix}"
            if path.exists():
                path.rename(issued / f"{name}.revoked-{stamp}{suffix}")

    # -- revocation -------------------------------------------------------------

    def revoke(self, which: str, reason: str = "unspecified", crl_days: int = 30) -> Issued:
        """Revoke by name or hex serial and rewrite the CRL."""
        if reason not in REASONS:
            raise CaError(f"reason {reason!r}: one of {', '.join(REASONS)}")
        with self._locked() as index:
            wanted = which.lower().removeprefix("0x")
            matches = [
                e for e in index.issued if e.active and (e.name == which or e.serial == wanted)
            ]
            if not matches:
                raise CaError(f"no valid certificate named or numbered {which!r} in {self.dir}")
            entry = matches[0]
            entry.revoked_at = utcnow().isoformat()
            entry.revocation_reason = reason
        self.write_crl(crl_days)
        return entry

    def write_crl(self, days: int = 30) -> Path:
        """Sign a fresh CRL listing every revoked certificate; replace ``crl.pem`` atomically."""
        ca_cert, ca_key = self.certificate, self._key()
        with self._locked() as index:
            index.crl_number += 1
            now = utcnow()
            ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            builder = (
                x509.CertificateRevocationListBuilder()
                .issuer_name(ca_cert.subject)
                .last_update(now - CLOCK_SKEW)
                .next_update(now + datetime.timedelta(days=days))
                .add_extension(x509.CRLNumber(index.crl_number), critical=False)
                .add_extension(
                    x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                    critical=False,
                )
            )
            for entry in index.issued:
                if entry.revoked_at is None:
                    continue
                revoked = (
                    x509.RevokedCertificateBuilder()
                    .serial_number(int(entry.serial, 16))
                    .revocation_date(datetime.datetime.fromisoformat(entry.revoked_at))
                    .add_extension(
                        x509.CRLReason(REASONS[entry.revocation_reason or "unspecified"]),
                        critical=False,
                    )
                    .build()
                )
                builder = builder.add_revoked_certificate(revoked)
            crl = builder.sign(ca_key, hashes.SHA256())
            write_public(self.crl_path, crl.public_bytes(serialization.Encoding.PEM))
        return self.crl_path

    # -- export -------------------------------------------------------------------

    def find(self, name: str) -> Issued:
        for entry in reversed(self.index().issued):
            if entry.name == name:
                return entry
        raise CaError(f"nothing named {name!r} was issued by {self.dir}")

    def export_pkcs12(
        self, name: str, out: Path, password: bytes, key_password: bytes | None = None
    ) -> Path:
        """A PKCS#12 keystore (key, certificate, CA) that Java's KeyStore loads."""
        entry = self.find(name)
        if not entry.active:
            raise CaError(
                f"{name!r} was revoked ({entry.revoked_at[:10] if entry.revoked_at else '?'}): "
                "a keystore of it would be refused; issue a new certificate"
            )
        if entry.key is None:
            raise CaError(f"{name!r} was issued from a CSR; its key is not here to export")
        key = serialization.load_pem_private_key(
            (self.dir / entry.key).read_bytes(), password=key_password
        )
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise CaError(f"{entry.key}: unsupported key type")
        chain = x509.load_pem_x509_certificates((self.dir / entry.cert).read_bytes())
        data = pkcs12.serialize_key_and_certificates(
            name.encode(), key, chain[0], chain[1:], _p12_encryption(password)
        )
        write_public(out, data, mode=0o600)  # holds the key: owner only
        return out

    def export_truststore(self, out: Path, password: bytes) -> Path:
        """A PKCS#12 truststore holding this CA's certificate as a trusted entry."""
        cert = pkcs12.PKCS12Certificate(self.certificate, self.dir.name.encode())
        data = pkcs12.serialize_java_truststore([cert], _p12_encryption(password))
        write_public(out, data)
        return out

    # -- reporting ----------------------------------------------------------------

    def expiring(
        self, within: datetime.timedelta, crl_within: datetime.timedelta | None = None
    ) -> list[tuple[str, datetime.datetime]]:
        """(what, when) for the CA and every valid certificate ending within ``within``,
        and the CRL when its next update is within ``crl_within`` (``within`` unless
        told: a CRL lives as long as a usual warning window, so it gets a shorter one)."""
        limit = utcnow() + within
        crl_limit = limit if crl_within is None else utcnow() + crl_within
        found: list[tuple[str, datetime.datetime]] = []
        ca_end = self.certificate.not_valid_after_utc
        if ca_end <= limit:
            found.append((f"{self.dir.name}: CA certificate", ca_end))
        if self.crl_path.is_file():
            crl = x509.load_pem_x509_crl(self.crl_path.read_bytes())
            if crl.next_update_utc is not None and crl.next_update_utc <= crl_limit:
                found.append(
                    (f"{self.dir.name}: CRL (re-sign: kgw certs crl)", crl.next_update_utc)
                )
        for entry in self.index().issued:
            if entry.active and entry.expires <= limit:
                found.append((f"{self.dir.name}/{entry.name} ({entry.kind})", entry.expires))
        return found


def _p12_encryption(password: bytes) -> serialization.KeySerializationEncryption:
    return (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(100_000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password)
    )


def _dump_index(index: Index) -> bytes:
    data = {"crl_number": index.crl_number, "issued": [asdict(e) for e in index.issued]}
    return (json.dumps(data, indent=2) + "\n").encode()


def find_cas(root: Path) -> list[CertificateAuthority]:
    """Every CA directory directly under ``root``."""
    if not root.is_dir():
        return []
    return [CertificateAuthority(p) for p in sorted(root.iterdir()) if (p / "ca.pem").is_file()]
