"""The ``accesslog`` section of the configuration, validated with ``gateway/config.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIB = 1024 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AccessLogTopicConfig(_Strict):
    """Also produce every record to a topic on the backend cluster (it must exist)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    acks: Literal[-1, 1] = -1
    timeout_s: float = Field(default=10.0, gt=0)
    batch_max_bytes: int = Field(default=512 * 1024, ge=1024, le=64 * MIB)
    queue_size: int | None = Field(default=None, ge=1)


class AccessLogConfig(_Strict):
    """Where access-log records go, and what happens when a sink cannot keep up."""

    enabled: bool = True
    path: Path | None = Path("logs/access.log")
    max_bytes: int = Field(default=100 * MIB, ge=64 * 1024)
    max_files: int = Field(default=10, ge=1, le=1000)
    queue_size: int = Field(default=65536, ge=1)
    on_full: Literal["drop", "block"] = "drop"
    instance: str | None = Field(default=None, min_length=1, max_length=255)
    report_interval_s: float = Field(default=10.0, gt=0)
    batch_delay_ms: float = Field(default=50.0, ge=0, le=1000)
    topic: AccessLogTopicConfig | None = None

    @model_validator(mode="after")
    def _check_sinks(self) -> AccessLogConfig:
        if self.enabled and self.path is None and self.topic is None:
            raise ValueError("an enabled access log needs a path, a topic or both")
        return self
