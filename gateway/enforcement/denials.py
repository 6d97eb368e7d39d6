"""One log line per distinct authorization denial per connection and interval."""

from __future__ import annotations

import logging
import time

from ..identity import ClientIdentity
from ..protocol import apis

log = logging.getLogger("kgw.authz")
DENIAL_LOG_INTERVAL_S = 10.0


class DenialLog:
    """Rate-limits ``authorization_denied`` lines: the same denials on one connection are
    logged once every ``DENIAL_LOG_INTERVAL_S``, with the count of those left out."""

    def __init__(self) -> None:
        self._logged: dict[str, tuple[float, int]] = {}

    def log(self, reasons: list[str], identity: ClientIdentity, key: int, version: int) -> None:
        summary = "; ".join(reasons[:5]) + (
            f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else ""
        )
        now = time.monotonic()
        last, suppressed = self._logged.get(summary, (0.0, 0))
        if now - last < DENIAL_LOG_INTERVAL_S:
            self._logged[summary] = (last, suppressed + 1)
            return
        self._logged[summary] = (now, 0)
        if suppressed:
            summary += f" [{suppressed} identical denials not logged]"
        log.info(
            "request denied: %s",
            summary,
            extra={
                "event": "authorization_denied",
                "principal": identity.principal,
                "peer": f"{identity.host}:{identity.port}",
                "listener": identity.listener,
                "api": apis.api_name(key),
                "api_version": version,
                "count": len(reasons),
            },
        )
