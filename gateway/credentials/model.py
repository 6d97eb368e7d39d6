"""The records in the credential store and how they are serialized.

``ApiKey`` and ``ScramCredential`` hold only derived material (a slow hash; SCRAM's
StoredKey/ServerKey), never a secret. ``public()`` is the view without even that,
for listings and the audit hooks.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .hashing import SCRAM_HASHES, b64, unb64

KeyState = Literal["active", "revoked"]
PRINCIPAL_RE = re.compile(r"User:\S(?:[^\x00-\x1f\x7f]*\S)?")
# a tenant name (also the tenants' own grammar, gateway/tenants/model.py): no dots, so
# no tenant's "<name>." prefix lies inside another's
TENANT_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?")
SCRAM_USER_RE = re.compile(r"[^\x00-\x1f\x7f]{1,255}")
DESCRIPTION_MAX = 256


class InvalidCredential(ValueError):
    """A credential that may not be stored (bad principal, tenant, name...)."""


class CorruptRecord(ValueError):
    """A stored record cannot be read (the store was edited by hand or damaged)."""


def check_principal(principal: str) -> str:
    if not PRINCIPAL_RE.fullmatch(principal) or len(principal) > 256:
        raise InvalidCredential(f"principal must look like User:<name>, got {principal!r}")
    return principal


def check_tenant(tenant: str) -> str:
    if not TENANT_RE.fullmatch(tenant):
        raise InvalidCredential(
            f"tenant {tenant[:80]!r}: 1-48 of a-z, 0-9 and '-', starting and ending with a "
            "letter or digit (the tenant's name, as `kgw tenant create` made it)"
        )
    return tenant


def check_scram_user(user: str) -> str:
    if not SCRAM_USER_RE.fullmatch(user):
        raise InvalidCredential("a SCRAM user name is 1-255 characters without control characters")
    return user


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    principal: str
    tenant: str
    secret_hash: str
    state: KeyState = "active"
    description: str = ""
    created_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    revoked_at: float | None = None

    def usable(self, now: float | None = None) -> bool:
        if self.state != "active":
            return False
        return self.expires_at is None or self.expires_at > (time.time() if now is None else now)

    def revoked(self, at: float | None = None) -> ApiKey:
        return replace(self, state="revoked", revoked_at=time.time() if at is None else at)

    def public(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "principal": self.principal,
            "tenant": self.tenant,
            "state": self.state,
            "description": self.description,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }

    def to_record(self) -> dict[str, Any]:
        return {**self.public(), "secret_hash": self.secret_hash}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ApiKey:
        try:
            state = record["state"]
            if state not in ("active", "revoked"):
                raise ValueError(state)
            return cls(
                key_id=str(record["key_id"]),
                principal=str(record["principal"]),
                tenant=str(record["tenant"]),
                secret_hash=str(record["secret_hash"]),
                state=state,
                description=str(record.get("description", "")),
                created_at=float(record["created_at"]),
                expires_at=_optional_float(record.get("expires_at")),
                revoked_at=_optional_float(record.get("revoked_at")),
            )
        except (KeyError, TypeError, ValueError):
            raise CorruptRecord("unreadable API key record in the credential store") from None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    user: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    tenant: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    def public(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "mechanism": self.mechanism,
            "iterations": self.iterations,
            "tenant": self.tenant,
            "created_at": self.created_at,
        }

    def to_record(self) -> dict[str, Any]:
        return {
            **self.public(),
            "salt": b64(self.salt),
            "stored_key": b64(self.stored_key),
            "server_key": b64(self.server_key),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ScramCredential:
        try:
            mechanism = str(record["mechanism"])
            if mechanism not in SCRAM_HASHES:
                raise ValueError(mechanism)
            tenant = record.get("tenant")
            return cls(
                user=str(record["user"]),
                mechanism=mechanism,
                salt=unb64(record["salt"]),
                iterations=int(record["iterations"]),
                stored_key=unb64(record["stored_key"]),
                server_key=unb64(record["server_key"]),
                tenant=None if tenant is None else str(tenant),
                created_at=float(record["created_at"]),
            )
        except (KeyError, TypeError, ValueError):
            raise CorruptRecord("unreadable SCRAM record in the credential store") from None


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
