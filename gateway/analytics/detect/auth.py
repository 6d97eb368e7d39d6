"""Failed authentication: bursts per principal and per address, and password spraying.

Failures are cut into bursts: consecutive failures for the same key no further
apart than a gap belong to one burst. These detectors need no baseline and look
at the whole input. Pure Python over ``Single`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import groupby

from .. import kinds
from ..findings import Finding
from .context import Thresholds
from .rows import Single


def episodes(
    rows: Iterable[Single], key: Callable[[Single], str | None], gap_s: int
) -> Iterator[tuple[str, list[Single]]]:
    """(key, rows) per burst: rows of one key, none further than ``gap_s`` from the last."""
    keyed = sorted((r for r in rows if key(r) is not None), key=lambda r: (key(r), r.ts))
    for name, group in groupby(keyed, key=key):
        burst: list[Single] = []
        for row in group:
            if burst and row.ts - burst[-1].ts > gap_s:
                yield str(name), burst
                burst = []
            burst.append(row)
        if burst:
            yield str(name), burst


def _severity(count: int) -> str:
    return "critical" if count >= 100 else "high" if count >= 30 else "medium"


def _minutes(burst: list[Single]) -> float:
    return max(1.0, (burst[-1].ts - burst[0].ts) / 60)


def auth_bursts(singles: list[Single], t: Thresholds) -> list[Finding]:
    failed = [s for s in singles if s.kind == "auth_failure"]
    found: list[Finding] = []
    for principal, burst in episodes(failed, lambda s: s.principal, t.auth_gap_s):
        if len(burst) < t.auth_principal_min:
            continue
        hosts = sorted({s.host for s in burst if s.host})
        found.append(
            Finding(
                kinds.AUTH_BURST_PRINCIPAL,
                _severity(len(burst)),
                len(burst) / t.auth_principal_min,
                principal,
                burst[0].ts,
                burst[-1].ts,
                f"{len(burst)} failed logins as {principal} in {_minutes(burst):.0f} min "
                f"from {len(hosts)} address(es)",
                {
                    "failures": len(burst),
                    "minutes": round(_minutes(burst), 1),
                    "addresses": len(hosts),
                    "sample_addresses": hosts[:5],
                    "threshold": t.auth_principal_min,
                },
                principal=principal,
                tenant=next((s.tenant for s in burst if s.tenant), None),
            )
        )
    for host, burst in episodes(failed, lambda s: s.host, t.auth_gap_s):
        if len(burst) >= t.auth_address_min:
            found.append(_address_finding(kinds.AUTH_BURST_ADDRESS, host, burst, t))
    for host, burst in episodes(failed, lambda s: s.host, t.spray_gap_s):
        if len({s.principal for s in burst if s.principal}) >= t.spray_principals_min:
            found.append(_address_finding(kinds.SPRAYING, host, burst, t))
    return found


def _address_finding(detector: str, host: str, burst: list[Single], t: Thresholds) -> Finding:
    names = sorted({s.principal for s in burst if s.principal})
    minutes = _minutes(burst)
    evidence: dict[str, object] = {
        "failures": len(burst),
        "principals": len(names),
        "minutes": round(minutes, 1),
        "sample_principals": names[:8],
    }
    if detector == kinds.SPRAYING:
        evidence["threshold"] = t.spray_principals_min
        return Finding(
            detector,
            "critical" if len(names) >= 20 else "high",
            len(names) / t.spray_principals_min,
            host,
            burst[0].ts,
            burst[-1].ts,
            f"{host} failed to log in as {len(names)} different principals in {minutes:.0f} min",
            evidence,
            client_host=host,
        )
    evidence["threshold"] = t.auth_address_min
    return Finding(
        detector,
        _severity(len(burst)),
        len(burst) / t.auth_address_min,
        host,
        burst[0].ts,
        burst[-1].ts,
        f"{len(burst)} failed logins from {host} in {minutes:.0f} min ({len(names)} principal(s))",
        evidence,
        client_host=host,
    )


def throttle_storms(singles: list[Single], t: Thresholds) -> list[Finding]:
    throttled = [s for s in singles if s.kind == "throttled"]
    found = []
    for principal, burst in episodes(throttled, lambda s: s.principal, t.throttle_gap_s):
        total = sum(s.throttle_ms for s in burst)
        if len(burst) < t.throttle_min or total < t.throttle_ms_min:
            continue
        minutes = _minutes(burst)
        found.append(
            Finding(
                kinds.THROTTLE_STORM,
                "medium" if total >= 60_000 else "low",
                len(burst) / t.throttle_min,
                principal,
                burst[0].ts,
                burst[-1].ts,
                f"{len(burst)} responses to {principal} throttled in {minutes:.0f} min "
                f"({total / 1000:.0f} s of throttle time)",
                {
                    "throttled": len(burst),
                    "throttle_ms_total": total,
                    "throttle_ms_max": max(s.throttle_ms for s in burst),
                    "minutes": round(minutes, 1),
                },
                principal=principal,
                tenant=next((s.tenant for s in burst if s.tenant), None),
            )
        )
    return found
