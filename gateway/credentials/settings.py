"""The ``sasl.credential_store`` section: where the credentials live."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..redisurl import RedisUrl


class CredentialStoreConfig(BaseModel):
    """Exactly one of ``file`` (a single instance) or ``redis_url`` (shared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    redis_url: RedisUrl | None = None
    redis_prefix: str = Field(default="kgw:credentials", min_length=1)
    cache_ttl_s: float = Field(default=0.0, ge=0, le=1.0)

    @model_validator(mode="after")
    def _one_backend(self) -> CredentialStoreConfig:
        if (self.file is None) == (self.redis_url is None):
            raise ValueError("give exactly one of file or redis_url")
        return self
