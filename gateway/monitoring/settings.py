"""The ``monitoring`` section: service health, per-tenant lag and the canary (docs/monitoring.md).

Absent, or ``enabled: false``: no monitoring loop runs. Every loop runs in the
background, off the data path; intervals bound what it costs the brokers.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..tls.settings import UpstreamTlsConfig
from ..upstream.settings import UpstreamSaslConfig

TenantName = Annotated[str, Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HealthConfig(_Strict):
    """Cluster health through the gateway's own broker client (``BrokerClient``)."""

    enabled: bool = True
    interval_s: float = Field(default=30.0, ge=0.5, le=3600)
    expected_brokers: int = Field(default=0, ge=0)  # 0: whatever the cluster registers
    log_dirs: bool = True  # DescribeLogDirs on every broker (sizes per broker and tenant)
    default_min_insync_replicas: int = Field(default=1, ge=1)  # topics that do not say


class LagConfig(_Strict):
    """Consumer lag of every tenant's groups (classic and KIP-848)."""

    enabled: bool = True
    interval_s: float = Field(default=30.0, ge=0.5, le=3600)
    rate_window_s: float = Field(default=300.0, ge=1, le=86_400)  # consume rate for catch-up
    threshold: int = Field(default=10_000, ge=0)  # records of lag before the alert
    thresholds: dict[TenantName, Annotated[int, Field(ge=0)]] = {}  # per-tenant overrides
    max_groups: int = Field(default=10_000, ge=1)  # groups examined per round
    partition_metrics: bool = False  # also lag per group and partition on /metrics

    def threshold_for(self, tenant: str) -> int:
        return self.thresholds.get(tenant, self.threshold)


class CanaryConfig(_Strict):
    """The end-to-end canary: sequenced records through a public listener and back."""

    enabled: bool = False
    listener: str | None = None  # a listener's name; absent: the first one
    tenant: TenantName = "kgw-canary"  # the label its figures carry
    topic: str = Field(default="kgw-canary.probe", pattern=r"^[A-Za-z0-9._-]{1,249}$")
    create_topic: bool = True  # created through the admin client with one partition per broker
    replication_factor: int = Field(default=3, ge=1)
    sasl: UpstreamSaslConfig | None = None  # the canary tenant's credentials (password_file)
    tls: UpstreamTlsConfig | None = None  # to trust a TLS listener
    interval_s: float = Field(default=1.0, ge=0.05, le=600)
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    lost_after_s: float = Field(default=30.0, gt=0, le=3600)
    window_s: float = Field(default=60.0, ge=1, le=3600)  # availability and percentiles
    availability_sla: float = Field(default=0.999, gt=0, le=1)


class MonitoringConfig(_Strict):
    """Service monitoring (docs/monitoring.md); figures go to ``/metrics``."""

    enabled: bool = True
    health: HealthConfig = HealthConfig()
    lag: LagConfig = LagConfig()
    canary: CanaryConfig = CanaryConfig()
    prefix_format: str = Field(default="{tenant}.", pattern=r"^\{tenant\}[^{}]+$")
    max_tenants: int = Field(default=1000, ge=1)  # the rest is labelled ``other``

    @model_validator(mode="after")
    def _check(self) -> MonitoringConfig:
        if self.canary.enabled and not self.canary.topic:
            raise ValueError("canary.topic is required")
        return self
