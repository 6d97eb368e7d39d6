"""Secrets and derived keys. Pure functions, CPU only (call the slow ones off the loop).

API secrets are random 256-bit tokens, stored only as a salted scrypt hash
``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>``; the parameters travel with the
hash, so they can be raised later without invalidating existing keys.

SCRAM credentials follow RFC 5802: ``SaltedPassword = Hi(password, salt, i)``
(PBKDF2-HMAC), ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``,
``ServerKey = HMAC(SaltedPassword, "Server Key")``. The password is used as its
UTF-8 bytes without SASLprep, as Kafka and its clients do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from typing import Literal

ScramMechanismName = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]
SCRAM_HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384  # Kafka's own bounds for SCRAM credentials
SCRAM_SALT_BYTES = 32

SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
SCRYPT_SALT_BYTES = 16
SCRYPT_DKLEN = 32
_SCRYPT_MAXMEM = 256 * 1024 * 1024

KEY_ID_PREFIX = "ak_"
SECRET_PREFIX = "sk_"


class HashFormatError(ValueError):
    """A stored hash is not in a format this version understands (the store is damaged)."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def new_key_id() -> str:
    return KEY_ID_PREFIX + secrets.token_hex(10)


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(
    secret: str,
    *,
    n: int = SCRYPT_N,
    r: int = SCRYPT_R,
    p: int = SCRYPT_P,
    salt: bytes | None = None,
) -> str:
    """A salted scrypt hash of ``secret`` (slow: ~0.1-0.3 s and 32 MiB)."""
    salt = os.urandom(SCRYPT_SALT_BYTES) if salt is None else salt
    digest = _scrypt(secret.encode("utf-8"), salt, n, r, p, SCRYPT_DKLEN)
    return f"scrypt${n}${r}${p}${b64(salt)}${b64(digest)}"


def verify_secret(secret: bytes, encoded: str) -> bool:
    """Whether ``secret`` matches ``encoded`` (constant time in the secret)."""
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        if scheme != "scrypt":
            raise ValueError(scheme)
        expected = unb64(digest)
        actual = _scrypt(secret, unb64(salt), int(n), int(r), int(p), len(expected))
    except ValueError:
        raise HashFormatError("unreadable secret hash in the credential store") from None
    return hmac.compare_digest(actual, expected)


def _scrypt(secret: bytes, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM, dklen=dklen)


def scram_hash(mechanism: str) -> str:
    try:
        return SCRAM_HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def hmac_digest(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def scram_keys(mechanism: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """``(StoredKey, ServerKey)`` for a password (slow: PBKDF2 with ``iterations``)."""
    hash_name = scram_hash(mechanism)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac_digest(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac_digest(hash_name, salted, b"Server Key")
    return stored_key, server_key


def new_scram_salt() -> bytes:
    return os.urandom(SCRAM_SALT_BYTES)


def dummy_salt(seed: bytes, mechanism: str, user: str) -> bytes:
    """A salt for a user that does not exist: stable per (seed, mechanism, user), so that
    asking twice gives the same answer, as it would for a real user."""
    message = f"{mechanism}\0{user}".encode()
    return hmac_digest("sha256", seed, message)[:SCRAM_SALT_BYTES]
