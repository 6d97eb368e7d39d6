"""``kgw analyze --follow``'s configuration file, and the response policy file.

Both are YAML, validated here (unknown keys are errors); ``docs/analytics.md``
("Near-real-time mode, alerts and response") documents every field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, model_validator

from .kinds import DETECTORS

Action = Literal["block_address", "revoke_key", "suspend_tenant"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Strict):
    """The access-log topic the gateway writes (``accesslog.topic``)."""

    bootstrap_servers: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    # Extra consumer options, passed as ``kafka.<name>`` (security.protocol, sasl.*, ssl.*).
    kafka_options: dict[str, str] = Field(default_factory=dict)


class AlertsConfig(_Strict):
    webhook_url: HttpUrl | None = None  # every new finding, as JSON
    alertmanager_url: HttpUrl | None = None  # base URL; alerts go to <url>/api/v2/alerts
    min_severity: Literal["low", "medium", "high", "critical"] = "low"
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    retries: int = Field(default=2, ge=0, le=10)
    resolve_after_s: float = Field(default=3600.0, gt=0)  # Alertmanager's endsAt


class ResponseConfig(_Strict):
    """Opt-in response: the policy file, and the gateway configuration whose audited
    admin paths (policy store, credential store, tenants, audit trail) apply it."""

    policy_file: Path
    gateway_config: Path
    dry_run: bool = True
    actor: str = "kgw-analyze"


class FollowConfig(_Strict):
    source: SourceConfig
    checkpoint_dir: Path  # Spark's offsets, the retained records, the emitted ids
    out: Path  # findings.jsonl (one new finding a line) and response.jsonl
    trigger_s: float = Field(default=10.0, ge=1, le=50)  # findings within 60 s of events
    retain_hours: float = Field(default=26.0, gt=0)  # the history the detectors are given
    detect_hours: float = Field(default=1.0, gt=0)  # the window baselines judge
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    response: ResponseConfig | None = None


class ResponseRule(_Strict):
    detector: str
    min_severity: Literal["low", "medium", "high", "critical"] = "high"
    action: Action
    expire_s: float | None = Field(default=None, gt=0)  # temporary blocks only

    @model_validator(mode="after")
    def _known(self) -> ResponseRule:
        if self.detector != "*" and self.detector not in DETECTORS:
            raise ValueError(f"unknown detector {self.detector!r} (one of {', '.join(DETECTORS)})")
        if self.expire_s is not None and self.action != "block_address":
            raise ValueError("expire_s applies to block_address only")
        return self


class ResponsePolicy(_Strict):
    rules: tuple[ResponseRule, ...] = ()
    # Never act on these (addresses or CIDR blocks, principals, tenants).
    never_block: tuple[str, ...] = ()
    never_revoke: tuple[str, ...] = ()
    never_suspend: tuple[str, ...] = ()


class SettingsError(ValueError):
    """A file that is not valid configuration; the message says where and why."""


def _load(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SettingsError(f"{path}: {exc}") from None


def load_follow(path: Path) -> FollowConfig:
    try:
        return FollowConfig.model_validate(_load(path))
    except ValidationError as exc:
        raise SettingsError(f"{path}: {exc}") from None


def load_policy(path: Path) -> ResponsePolicy:
    try:
        return ResponsePolicy.model_validate(_load(path))
    except ValidationError as exc:
        raise SettingsError(f"{path}: {exc}") from None
