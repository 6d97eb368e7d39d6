"""The ``server`` section of the configuration, validated with ``gateway/config.py``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_WORKERS = 256


class ServerConfig(BaseModel):
    """How the gateway runs on its host (docs/configuration.md, decision 0030)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # worker processes accepting on the same ports (SO_REUSEPORT); 0: one per core
    workers: int = Field(default=0, ge=0, le=MAX_WORKERS)
    # a worker that ran at least this long before dying is restarted at once
    restart_stable_s: float = Field(default=10.0, gt=0)
    # the longest wait before a worker that keeps dying is started again
    restart_max_backoff_s: float = Field(default=30.0, gt=0)
