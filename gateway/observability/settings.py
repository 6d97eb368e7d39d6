"""The ``metrics`` section of the configuration, validated with ``gateway/config.py``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MetricsConfig(BaseModel):
    """The Prometheus and health endpoint (``/metrics``, ``/healthz``, ``/readyz``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    bind_host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=9404, ge=0, le=65535)  # 0: any free port (tests)
    max_tenants: int = Field(default=1000, ge=1)
