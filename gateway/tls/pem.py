"""Keys, PEM files and X.509 names for the certificate authority (``ca.py``): key
generation, private files written 0600 and never overwritten, subject and SAN parsing."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

KeyType = Literal["ec", "rsa"]
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class CaError(Exception):
    """A certificate-authority operation cannot be done; the message says why."""


def new_key(key_type: KeyType = "ec") -> PrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=3072)
    return ec.generate_private_key(ec.SECP256R1())


def write_private(path: Path, data: bytes) -> None:
    """Create a new file readable by its owner only; refuse to overwrite one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise CaError(f"{path} already exists; not overwriting a private key") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def write_public(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace a file atomically (write a temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, mode)
    tmp.replace(path)


def key_pem(key: PrivateKey, password: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def cert_pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def parse_subject(text: str) -> x509.Name:
    try:
        name = x509.Name.from_rfc4514_string(text)
    except ValueError as exc:
        raise CaError(f"subject {text!r}: {exc}") from None
    if not list(name):
        raise CaError("subject is empty")
    return name


def parse_san(text: str) -> x509.GeneralName:
    """``DNS:name``, ``IP:addr``, ``URI:uri``, ``EMAIL:addr``; a bare name is DNS or IP."""
    kind, sep, value = text.partition(":")
    if not sep or kind.upper() not in {"DNS", "IP", "URI", "EMAIL"}:
        kind, value = "", text
    kind = kind.upper()
    if kind == "URI":
        return x509.UniformResourceIdentifier(value)
    if kind == "EMAIL":
        return x509.RFC822Name(value)
    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        if kind == "IP":
            raise CaError(f"SAN {text!r}: not an IP address") from None
    if not re.fullmatch(r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", value):
        raise CaError(f"SAN {text!r}: not a DNS name")
    return x509.DNSName(value.lower())


def san_text(name: x509.GeneralName) -> str:
    if isinstance(name, x509.DNSName):
        return f"DNS:{name.value}"
    if isinstance(name, x509.IPAddress):
        return f"IP:{name.value}"
    if isinstance(name, x509.UniformResourceIdentifier):
        return f"URI:{name.value}"
    if isinstance(name, x509.RFC822Name):
        return f"EMAIL:{name.value}"
    return str(name)
