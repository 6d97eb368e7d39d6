"""``upstream.sasl``: the gateway's own SASL identity towards the brokers.

Only the shape is checked here. The password lives in a file of its own
(``password_file``), never in the configuration: it is read when the gateway
starts (``identity.UpstreamIdentity.load``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

UpstreamMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class UpstreamSaslConfig(BaseModel):
    """Who the gateway is to the brokers (SASL_PLAINTEXT, or SASL_SSL with ``upstream.tls``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mechanism: UpstreamMechanism
    username: str = Field(min_length=1, max_length=255)
    password_file: Path
    timeout_s: float = Field(default=10.0, gt=0, le=300)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data: Any) -> Any:
        if isinstance(data, dict) and "password" in data:
            raise ValueError(
                "an inline password is not accepted: put it in a file and name it in password_file"
            )
        return data

    @field_validator("username")
    @classmethod
    def _check_username(cls, value: str) -> str:
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise ValueError("must not contain control characters")
        return value


TenantMechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]


class TenantIdentitiesConfig(BaseModel):
    """``upstream.tenant_identities``: the gateway logs in to the brokers as each tenant
    (``User:kgw-t-<tenant>``), with SCRAM credentials it derives from ``secret_file`` and
    provisions itself, and keeps the brokers' ACLs in step with the policy
    (docs/broker-enforcement.md, decision 0026)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mechanism: TenantMechanism = "SCRAM-SHA-512"
    secret_file: Path
    rotate_interval_s: float = Field(default=86_400.0, ge=60, le=365 * 86_400)
    acl_sync_interval_s: float = Field(default=30.0, ge=0.5, le=3600)
    user_prefix: str = Field(default="kgw-t-", pattern=r"^[a-z][a-z0-9-]{0,15}$")
