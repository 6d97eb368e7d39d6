"""The ``audit`` section of the configuration, validated with ``gateway/config.py``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AuditConfig(_Strict):
    """Where admin changes are recorded (docs/audit.md). Absent: changes are not audited.

    ``key_file`` holds the HMAC key (mode 0600, outside the repository); without
    one the trail is an unkeyed SHA-256 chain. The gateway never reads
    ``$KGW_AUDIT_KEY_FILE``: what it uses is what this section says.
    """

    trail: Path
    key_file: Path | None = None
