"""Certificates, keys, CA bundles and CRLs read from disk into ``ssl.SSLContext``s.

Every load validates the material as a whole, so that a bad replacement is
refused before it could take effect: files readable, the certificate not
expired and not yet-to-come, the key matching the certificate, CA bundles
holding CA certificates, each CRL signed by its CA and not past its next
update. ``MaterialError`` carries a message fit for an operator; key contents
and passphrases never appear in it.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding

from .ciphersuites import CipherSuiteError, set_tls13_ciphersuites
from .settings import ListenerTlsConfig, TlsVersion, UpstreamTlsConfig

log = logging.getLogger("kgw.tls")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class MaterialError(Exception):
    """TLS material on disk is unusable; the message names the file and the reason."""


@dataclass(frozen=True)
class Material:
    """A ready context plus what the logs say about it."""

    context: ssl.SSLContext
    fingerprint: str | None  # SHA-256 of the own certificate (None: no own certificate)
    not_after: datetime.datetime | None
    expiring: list[str]  # "what expires when", for items near their end
    crls: tuple[x509.CertificateRevocationList, ...] = ()  # the client CAs' CRLs, verified


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise MaterialError(f"{what} {path}: cannot read: {exc.strerror}") from None


def load_certificates(path: Path, what: str) -> list[x509.Certificate]:
    """All PEM certificates in a file (at least one)."""
    data = _read(path, what)
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise MaterialError(f"{what} {path}: no PEM certificate in the file")
    return certs


def _check_validity(cert: x509.Certificate, path: Path, what: str) -> None:
    now = _now()
    if cert.not_valid_after_utc <= now:
        raise MaterialError(f"{what} {path}: expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M}Z")
    if cert.not_valid_before_utc > now:
        raise MaterialError(
            f"{what} {path}: not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M}Z"
        )


def load_crl(path: Path, issuers: list[x509.Certificate]) -> x509.CertificateRevocationList:
    """A CRL that one of ``issuers`` signed and that is still current."""
    data = _read(path, "crl_file")
    try:
        crl = x509.load_pem_x509_crl(data)
    except ValueError:
        raise MaterialError(
            f"crl_file {path}: not a PEM CRL (convert a DER one: openssl crl -inform DER)"
        ) from None
    for issuer in issuers:
        if issuer.subject == crl.issuer:
            if not _crl_signed_by(crl, issuer):
                raise MaterialError(f"crl_file {path}: signature does not verify with its CA")
            break
    else:
        raise MaterialError(
            f"crl_file {path}: issued by {crl.issuer.rfc4514_string()}, not this CA"
        )
    next_update = crl.next_update_utc
    if next_update is not None and next_update <= _now():
        raise MaterialError(
            f"crl_file {path}: past its next update ({next_update:%Y-%m-%d %H:%M}Z);"
            " re-sign it (kgw certs crl)"
        )
    return crl


def _crl_signed_by(crl: x509.CertificateRevocationList, issuer: x509.Certificate) -> bool:
    try:
        return crl.is_signature_valid(issuer.public_key())  # type: ignore[arg-type]
    except (InvalidSignature, TypeError, ValueError):
        return False


def _password(path: Path | None) -> bytes | None:
    if path is None:
        return None
    return _read(path, "key_password_file").rstrip(b"\r\n")


def _warn_if_open(key_file: Path) -> None:
    """A private key any local user may read is said (not refused: a mounted Secret or
    a test may need group read), once per load."""
    try:
        mode = stat.S_IMODE(key_file.stat().st_mode)
    except OSError:
        return
    if mode & 0o007:
        log.warning(
            "key_file %s is accessible by others (mode %04o); chmod o-rwx it",
            key_file,
            mode,
            extra={"event": "tls_key_file_mode", "path": str(key_file)},
        )


def _load_own_pair(
    context: ssl.SSLContext, cert_file: Path, key_file: Path, password_file: Path | None
) -> x509.Certificate:
    """The context's own certificate chain and key; the leaf certificate."""
    chain = load_certificates(cert_file, "cert_file")
    _check_validity(chain[0], cert_file, "cert_file")
    _read(key_file, "key_file")  # a clear message for an unreadable key
    _warn_if_open(key_file)
    password = _password(password_file)
    try:
        # never OpenSSL's interactive prompt: an encrypted key without a password fails
        context.load_cert_chain(cert_file, key_file, password=password or (lambda: b""))
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc) or exc.reason == "KEY_VALUES_MISMATCH":
            raise MaterialError(
                f"key_file {key_file}: does not match cert_file {cert_file}"
            ) from None
        raise MaterialError(
            f"key_file {key_file}: cannot load the key ({exc.reason or 'bad format or passphrase'})"
        ) from None
    except OSError as exc:
        raise MaterialError(f"cert_file/key_file: cannot load ({exc.strerror})") from None
    return chain[0]


def _new_context(
    purpose: ssl.Purpose, min_version: TlsVersion, ciphers: str, server: bool
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = _VERSIONS[min_version]
    context.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    try:
        context.set_ciphers(ciphers)
    except ssl.SSLError:
        raise MaterialError(f"ciphers: OpenSSL accepts none of {ciphers!r}") from None
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    if server:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_SINGLE_ECDH_USE
    return context


def _expiring(cert: x509.Certificate, label: str, warn_days: float) -> list[str]:
    if cert.not_valid_after_utc - _now() < datetime.timedelta(days=warn_days):
        return [f"{label} expires {cert.not_valid_after_utc:%Y-%m-%d %H:%M}Z"]
    return []


def fingerprint(cert: x509.Certificate) -> str:
    return hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()


def server_material(config: ListenerTlsConfig, warn_days: float = 14) -> Material:
    """A server-side context for one listener, from its files as they are now."""
    context = _new_context(ssl.Purpose.CLIENT_AUTH, config.min_version, config.ciphers, True)
    if config.tls13_ciphersuites is not None:
        try:
            set_tls13_ciphersuites(context, config.tls13_ciphersuites)
        except CipherSuiteError as exc:
            raise MaterialError(f"tls13_ciphersuites: {exc}") from None
    leaf = _load_own_pair(context, config.cert_file, config.key_file, config.key_password_file)
    expiring = _expiring(leaf, f"certificate {config.cert_file}", warn_days)
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[config.client_auth]
    crls: list[x509.CertificateRevocationList] = []
    for ca in config.client_cas:
        cas = load_certificates(ca.ca_file, "ca_file")
        for cert in cas:
            _check_ca(cert, ca.ca_file)
            expiring += _expiring(cert, f"client CA {ca.ca_file}", warn_days)
        _load_verify(context, ca.ca_file, "ca_file")
        if ca.crl_file is not None:
            crl = load_crl(ca.crl_file, cas)
            if crl.next_update_utc is not None and crl.next_update_utc - _now() < (
                datetime.timedelta(days=min(warn_days, 3))
            ):
                expiring.append(f"CRL {ca.crl_file} next update {crl.next_update_utc:%Y-%m-%d}")
            _load_verify(context, ca.crl_file, "crl_file")
            crls.append(crl)
    if crls:
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return Material(context, fingerprint(leaf), leaf.not_valid_after_utc, expiring, tuple(crls))


def client_material(config: UpstreamTlsConfig, warn_days: float = 14) -> Material:
    """The context the gateway uses to connect to the brokers."""
    context = _new_context(ssl.Purpose.SERVER_AUTH, config.min_version, config.ciphers, False)
    context.check_hostname = config.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    expiring: list[str] = []
    if config.ca_files:
        for path in config.ca_files:
            for cert in load_certificates(path, "ca_files"):
                _check_ca(cert, path)
                expiring += _expiring(cert, f"broker CA {path}", warn_days)
            _load_verify(context, path, "ca_files")
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    leaf = None
    if config.cert_file is not None and config.key_file is not None:
        leaf = _load_own_pair(context, config.cert_file, config.key_file, config.key_password_file)
        expiring += _expiring(leaf, f"certificate {config.cert_file}", warn_days)
    return Material(
        context,
        fingerprint(leaf) if leaf is not None else None,
        leaf.not_valid_after_utc if leaf is not None else None,
        expiring,
    )


def _check_ca(cert: x509.Certificate, path: Path) -> None:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise MaterialError(f"{path}: {cert.subject.rfc4514_string()} is not a CA certificate")
    if cert.not_valid_after_utc <= _now():
        raise MaterialError(
            f"{path}: CA {cert.subject.rfc4514_string()} expired on"
            f" {cert.not_valid_after_utc:%Y-%m-%d}"
        )


def _load_verify(context: ssl.SSLContext, path: Path, what: str) -> None:
    try:
        context.load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise MaterialError(f"{what} {path}: OpenSSL cannot load it ({exc})") from None
