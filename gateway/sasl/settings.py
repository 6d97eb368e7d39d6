"""The ``sasl`` section of the configuration, validated with ``gateway/config.py``.

Only the shape is checked here; the keytab and the credential store are opened
by ``SaslServer.from_config`` when the gateway starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..credentials.hashing import SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS
from ..credentials.settings import CredentialStoreConfig
from ..redisurl import RedisUrl
from .kerberos_rules import RuleError, check_rules

if TYPE_CHECKING:
    from ..config import GatewayConfig

Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"]
_KERBEROS_PRINCIPAL = re.compile(r"^[^/@\s]+(?:/[^/@\s]+)?@[^/@\s]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KerberosConfig(_Strict):
    """GSSAPI: the gateway's service key and how client principals are named."""

    keytab: Path
    service_principal: str | None = None  # absent: any principal in the keytab
    default_realm: str | None = None  # absent: the service principal's realm
    principal_to_local_rules: list[str] = ["DEFAULT"]

    @field_validator("service_principal")
    @classmethod
    def _check_principal(cls, value: str | None) -> str | None:
        if value is not None and not _KERBEROS_PRINCIPAL.match(value):
            raise ValueError(f"expected service/host@REALM, got {value!r}")
        return value

    @field_validator("principal_to_local_rules")
    @classmethod
    def _check_rules(cls, rules: list[str]) -> list[str]:
        try:
            check_rules(rules)
        except RuleError as exc:
            raise ValueError(str(exc)) from None
        return rules

    @model_validator(mode="after")
    def _realm(self) -> KerberosConfig:
        if self.default_realm is None and self.service_principal is None:
            raise ValueError("default_realm is required when service_principal is absent")
        return self

    @property
    def realm(self) -> str:
        if self.default_realm is not None:
            return self.default_realm
        assert self.service_principal is not None
        return self.service_principal.rpartition("@")[2]


class FailureLimiterConfig(_Strict):
    """Slowing down repeated failures per client address and per claimed principal."""

    max_failures: int = Field(default=5, ge=1)
    window_s: float = Field(default=60.0, gt=0)
    base_delay_s: float = Field(default=1.0, ge=0)
    max_delay_s: float = Field(default=30.0, ge=0)
    max_keys: int = Field(default=100_000, ge=1)
    # Refuse without checking the secret for lockout_s after this many failures within
    # window_s; 0 turns it off. Per principal it is off: anyone could lock a victim out.
    lockout_address_failures: int = Field(default=0, ge=0)
    lockout_principal_failures: int = Field(default=0, ge=0)
    lockout_s: float = Field(default=300.0, gt=0)
    # Count failures together with every worker and gateway instance through Redis
    # (shared_failures.py): this URL, or the quotas' redis_url when it is not set.
    shared: bool = True
    redis_url: RedisUrl | None = None

    @model_validator(mode="after")
    def _delays(self) -> FailureLimiterConfig:
        if self.max_delay_s < self.base_delay_s:
            raise ValueError("max_delay_s must be at least base_delay_s")
        return self


class SaslConfig(_Strict):
    mechanisms: list[Mechanism] = Field(min_length=1)
    credential_store: CredentialStoreConfig | None = None
    scram_iterations: int = Field(default=8192, ge=SCRAM_MIN_ITERATIONS, le=SCRAM_MAX_ITERATIONS)
    kerberos: KerberosConfig | None = None
    session_lifetime_s: float = Field(default=3600.0, ge=0)
    revalidate_interval_s: float = Field(default=5.0, ge=0)
    auth_timeout_s: float = Field(default=10.0, gt=0)
    hash_concurrency: int = Field(default=2, ge=1, le=64)
    failure_limiter: FailureLimiterConfig = FailureLimiterConfig()

    @model_validator(mode="after")
    def _consistent(self) -> SaslConfig:
        if len(set(self.mechanisms)) != len(self.mechanisms):
            raise ValueError("mechanisms must not repeat")
        needs_store = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} & set(self.mechanisms)
        if needs_store and self.credential_store is None:
            raise ValueError(f"credential_store is required for {', '.join(sorted(needs_store))}")
        if "GSSAPI" in self.mechanisms and self.kerberos is None:
            raise ValueError("kerberos is required for GSSAPI")
        if 0 < self.revalidate_interval_s < 0.1:
            raise ValueError("revalidate_interval_s must be 0 (off) or at least 0.1")
        return self


def shared_failures_url(config: GatewayConfig) -> str | None:
    """The Redis a gateway's login failures are shared through (``GatewayConfig``), if any."""
    sasl = config.sasl
    if sasl is None or not sasl.failure_limiter.shared:
        return None
    if sasl.failure_limiter.redis_url is not None:
        return str(sasl.failure_limiter.redis_url)
    quotas = config.quotas
    return str(quotas.redis_url) if quotas is not None and quotas.redis_url else None
