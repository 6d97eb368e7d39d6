"""One log line per distinct authorization denial per connection and interval.

A connection remembers at most ``MAX_DISTINCT`` distinct denials. A client that keeps
naming new resources (a scan of topic names, say) would otherwise get one line, and
one remembered entry, per request: its denials past that bound are counted, and one
line per interval says how many went unlogged. Every request is in the access log
either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..identity import ClientIdentity
from ..protocol import apis

log = logging.getLogger("kgw.authz")
DENIAL_LOG_INTERVAL_S = 10.0
MAX_DISTINCT = 64


class DenialLog:
    """Rate-limits ``authorization_denied`` lines: the same denials on one connection are
    logged once every ``DENIAL_LOG_INTERVAL_S``, with the count of those left out."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._logged: dict[str, tuple[float, int]] = {}
        self._unlogged = 0  # distinct denials past MAX_DISTINCT, since the last report
        self._reported_at = float("-inf")
        self._sweep_at = float("-inf")  # when a full memory may next have room

    def log(self, reasons: list[str], identity: ClientIdentity, key: int, version: int) -> None:
        summary = "; ".join(reasons[:5]) + (
            f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else ""
        )
        now = self._clock()
        if self._unlogged and now - self._reported_at >= DENIAL_LOG_INTERVAL_S:
            self._report(identity, now)  # those counted in the interval that ended
        seen = self._logged.get(summary)
        if seen is not None and now - seen[0] < DENIAL_LOG_INTERVAL_S:
            self._logged[summary] = (seen[0], seen[1] + 1)
            return
        if seen is None and len(self._logged) >= MAX_DISTINCT and not self._forget(now):
            self._unlogged += 1
            if now - self._reported_at >= DENIAL_LOG_INTERVAL_S:
                self._report(identity, now)
            return
        suppressed = 0 if seen is None else seen[1]
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

    def _forget(self, now: float) -> bool:
        """Drop the denials whose interval is over; True if that made room. A memory that
        stays full is not swept again before its oldest entry's interval ends (a scan of
        new names would otherwise sweep it on every request)."""
        if now < self._sweep_at:
            return False
        self._logged = {
            summary: seen
            for summary, seen in self._logged.items()
            if now - seen[0] < DENIAL_LOG_INTERVAL_S
        }
        if len(self._logged) < MAX_DISTINCT:
            return True
        self._sweep_at = min(seen[0] for seen in self._logged.values()) + DENIAL_LOG_INTERVAL_S
        return False

    def _report(self, identity: ClientIdentity, now: float) -> None:
        log.warning(
            "%d more distinct denials on this connection, not logged one by one",
            self._unlogged,
            extra={
                "event": "authorization_denied_unlogged",
                "principal": identity.principal,
                "peer": f"{identity.host}:{identity.port}",
                "listener": identity.listener,
                "count": self._unlogged,
            },
        )
        self._unlogged = 0
        self._reported_at = now
