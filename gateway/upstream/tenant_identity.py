"""Per-tenant upstream principals: names, derived SCRAM credentials, rotation. No I/O
apart from reading the secret file once (``TenantSecret.load``).

The gateway logs in to the brokers as ``User:<user_prefix><tenant>`` for a tenant's
connections. Its password is never stored anywhere: it is derived from a secret only
the gateway holds and the rotation generation,

    password = base64url(HMAC-SHA512(secret, "kgw-tenant-upstream/v1\\0pw\\0<tenant>\\0<gen>"))
    salt     = HMAC-SHA512(secret, "kgw-tenant-upstream/v1\\0salt\\0<tenant>\\0<gen>")[:32]
    gen      = floor(unix time / rotate_interval_s)

so every gateway instance sharing the secret computes the same credential for the same
generation without talking to the others, and an upsert of it (AlterUserScramCredentials,
done by ``provision.TenantIdentities``) is idempotent. The salt is derived too, so two
instances upserting the same generation write the very same stored credential.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.alter_user_scram_credentials.v0.request import ScramCredentialUpsertion
from kio.static.primitive import i8, i32

from .identity import UpstreamCredentialError
from .settings import TenantIdentitiesConfig

SCRAM_ITERATIONS = 4096  # Kafka's minimum; the gateway runs one PBKDF2 per broker login
MIN_SECRET_BYTES = 32
MAX_SECRET_BYTES = 4096
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism
_LABEL = b"kgw-tenant-upstream/v1"


class TenantSecretError(UpstreamCredentialError):
    """``upstream.tenant_identities.secret_file`` cannot be used (start-up: exit 2)."""


def upstream_user(tenant: str, prefix: str = "kgw-t-") -> str:
    return f"{prefix}{tenant}"


def upstream_principal(tenant: str, prefix: str = "kgw-t-") -> str:
    return f"User:{upstream_user(tenant, prefix)}"


def tenant_of_upstream(principal: str, prefix: str = "kgw-t-") -> str | None:
    """The tenant whose upstream principal ``principal`` is, else ``None``."""
    head = f"User:{prefix}"
    return principal[len(head) :] or None if principal.startswith(head) else None


def generation(now: float, interval_s: float) -> int:
    """The rotation generation at unix time ``now``."""
    return int(now // interval_s)


def _mac(secret: bytes, *parts: str) -> bytes:
    message = b"\0".join([_LABEL, *(part.encode() for part in parts)])
    return hmac.digest(secret, message, "sha512")


def derive_password(secret: bytes, tenant: str, gen: int) -> str:
    return base64.urlsafe_b64encode(_mac(secret, "pw", tenant, str(gen))).decode().rstrip("=")


def derive_salt(secret: bytes, tenant: str, gen: int) -> bytes:
    return _mac(secret, "salt", tenant, str(gen))[:32]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


@dataclass(frozen=True, slots=True)
class TenantCredential:
    """One tenant's upstream login for one generation; ``repr`` hides the password."""

    tenant: str
    username: str
    mechanism: str
    generation: int
    password: str = field(repr=False)
    salt: bytes = field(repr=False)

    def upsertion(self, iterations: int = SCRAM_ITERATIONS) -> ScramCredentialUpsertion:
        """The AlterUserScramCredentials entry that stores this credential on the brokers."""
        return ScramCredentialUpsertion(
            name=self.username,
            mechanism=i8(MECHANISM_CODES[self.mechanism]),
            iterations=i32(iterations),
            salt=self.salt,
            salted_password=salted_password(self.mechanism, self.password, self.salt, iterations),
        )


class TenantSecret:
    """The gateway-held secret every tenant credential is derived from."""

    def __init__(self, config: TenantIdentitiesConfig, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise TenantSecretError(
                f"upstream.tenant_identities.secret_file: fewer than {MIN_SECRET_BYTES} bytes"
            )
        self.config = config
        self._secret = secret

    def __repr__(self) -> str:  # never the secret
        return f"TenantSecret({self.config.mechanism}, prefix={self.config.user_prefix!r})"

    @classmethod
    def load(cls, config: TenantIdentitiesConfig) -> TenantSecret:
        return cls(config, read_secret(config.secret_file))

    def generation(self, now: float) -> int:
        return generation(now, self.config.rotate_interval_s)

    def credential(self, tenant: str, gen: int) -> TenantCredential:
        return TenantCredential(
            tenant=tenant,
            username=upstream_user(tenant, self.config.user_prefix),
            mechanism=self.config.mechanism,
            generation=gen,
            password=derive_password(self._secret, tenant, gen),
            salt=derive_salt(self._secret, tenant, gen),
        )


def read_secret(path: Path) -> bytes:
    """The secret in ``path``: its first line (text, e.g. base64 of random bytes)."""
    what = "upstream.tenant_identities.secret_file"
    try:
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            raw = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TenantSecretError(f"{what}: cannot read {path}: {reason}") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise TenantSecretError(f"{what}: {path} is longer than {MAX_SECRET_BYTES} bytes")
    lines = raw.splitlines()
    secret = lines[0].strip() if lines else b""
    if len(secret) < MIN_SECRET_BYTES:
        raise TenantSecretError(
            f"{what}: {path} holds fewer than {MIN_SECRET_BYTES} bytes on its first line"
        )
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TenantSecretError(f"{what}: {path} is readable by others than its owner (chmod 600)")
    return secret
