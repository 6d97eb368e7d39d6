"""The ``quotas:`` section of the configuration, and the plan model shared with the store.

Only the shape is checked here. Plans kept in the quota store (``kgw quota plan
set``) are validated with the same ``PlanConfig`` model when they are written and
when they are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..redisurl import RedisUrl

PlanName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Rate = Annotated[float, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanConfig(_Strict):
    """A named bundle of quotas and licence limits; a missing value means unlimited.

    Rates are per second (bytes for produce/fetch, requests, partition mutations,
    new connections); a missing burst is ``default_burst_s`` seconds of the rate.
    """

    produce_bytes: Rate | None = None
    produce_bytes_burst: Rate | None = None
    fetch_bytes: Rate | None = None
    fetch_bytes_burst: Rate | None = None
    requests: Rate | None = None
    requests_burst: Rate | None = None
    mutations: Rate | None = None
    mutations_burst: Rate | None = None
    max_connections: int | None = Field(default=None, ge=0)
    connection_rate: Rate | None = None
    max_topics: int | None = Field(default=None, ge=0)
    max_partitions_per_topic: int | None = Field(default=None, ge=1)
    max_total_partitions: int | None = Field(default=None, ge=0)
    max_retention_ms: int | None = Field(default=None, ge=1)

    def values(self) -> dict[str, float]:
        """The quota values this plan sets (licence limits excluded)."""
        licence = {
            "max_topics",
            "max_partitions_per_topic",
            "max_total_partitions",
            "max_retention_ms",
        }
        return {
            key: float(value)
            for key, value in self.model_dump(exclude_none=True).items()
            if key not in licence
        }


class AddressLimitsConfig(_Strict):
    """Connection limits for every client address (a store entry for an ``ip`` overrides)."""

    max_connections: int | None = Field(default=None, ge=0)
    connection_rate: Rate | None = None


class QuotaConfig(_Strict):
    """Quotas, plans and licence limits (docs/quotas.md). Absent: no quotas at all."""

    redis_url: RedisUrl | None = None
    key_prefix: str = Field(default="kgw:quota:", min_length=1, max_length=64)
    store_file: Path = Path("quotas.json")
    on_redis_failure: Literal["open", "closed"] = "open"
    expected_instances: int = Field(default=1, ge=1, le=1000)
    lease_fraction: float = Field(default=0.1, gt=0, le=1)
    sync_interval_s: float = Field(default=0.05, gt=0, le=5)
    lease_idle_s: float = Field(default=2.0, gt=0)
    settings_refresh_s: float = Field(default=1.0, gt=0, le=60)
    redis_timeout_s: float = Field(default=0.5, gt=0, le=30)
    reconnect_max_s: float = Field(default=5.0, gt=0, le=300)
    max_throttle_ms: int = Field(default=10_000, ge=1, le=300_000)
    default_burst_s: float = Field(default=1.0, gt=0, le=3600)
    default_plan: PlanName | None = None
    plans: dict[PlanName, PlanConfig] = {}
    topic_prefix: str = "{tenant}."
    address_limits: AddressLimitsConfig = AddressLimitsConfig()

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if value.count("{tenant}") != 1 or not value.startswith("{tenant}"):
            raise ValueError("must start with {tenant} and hold it once, e.g. '{tenant}.'")
        if value == "{tenant}":
            raise ValueError("needs a separator after {tenant}, e.g. '{tenant}.'")
        return value

    @model_validator(mode="after")
    def _check_default_plan(self) -> QuotaConfig:
        if self.default_plan is not None and self.default_plan not in self.plans:
            raise ValueError(f"default_plan {self.default_plan!r} is not one of plans")
        return self
