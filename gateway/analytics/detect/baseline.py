"""Detectors that compare an hour with the principal's own history (pure Python).

The baseline is every hour before ``detect_from``; findings come from the hours
after it, for principals seen at least ``history_s`` before it. Spikes use the
robust z-score on the median and MAD of the principal's baseline hours, and must
also clear a multiple of the median and of the busiest baseline hour, so that a
nightly batch job, busy every night, is not a spike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .. import kinds
from ..findings import Finding, merge_adjacent
from .context import Thresholds
from .rows import HOUR, HourRow, Stats, by_key, hour_of_day, robust

Factor = Callable[[HourRow], float]


@dataclass(frozen=True, slots=True)
class Period:
    """One principal's hours: the baseline (before the window) and the window's."""

    principal: str
    base: list[HourRow]
    recent: list[HourRow]


def periods(rows: Iterable[HourRow], detect_from: int, t: Thresholds) -> list[Period]:
    """Per principal seen at least ``history_s`` before the window and active in it, its
    baseline and recent hours; ``rows`` sorted by principal, then hour."""
    found: list[Period] = []
    for series in by_key(rows):
        if series[0].hour > detect_from - t.history_s:
            continue  # too new to have a baseline
        recent = [r for r in series if r.hour >= detect_from]
        if recent:
            base = [r for r in series if r.hour < detect_from]
            found.append(Period(series[0].principal, base, recent))
    return found


def hourly_findings(
    periods: Iterable[Period], t: Thresholds, factor: Factor | None = None
) -> list[Finding]:
    """Volume spikes, denied spikes and unusual hours; ``factor`` (principal's row ->
    how much its whole tenant rose that hour, 1.0 when it did not) discounts a spike
    its peers share."""
    found: list[Finding] = []
    for period in periods:
        found += volume_spikes(period.base, period.recent, t, factor)
        found += denied_spikes(period.base, period.recent, t)
        found += unusual_hours(period.base, period.recent, t, factor)
    return merge_adjacent(found)


def probing_findings(
    periods: Iterable[Period],
    denied_topics: Mapping[tuple[str, int], tuple[str, ...]],
    detect_from: int,
    t: Thresholds,
) -> list[Finding]:
    """Hours in which a principal was denied many more distinct topics than in any hour
    of its baseline; ``denied_topics`` maps (principal, hour) to the distinct topics
    denied then (sorted), for the hours that have any."""
    most: dict[str, int] = {}  # per principal, the most distinct denied topics of a baseline hour
    for (principal, hour), names in denied_topics.items():
        if hour < detect_from:
            most[principal] = max(most.get(principal, 0), len(names))
    found: list[Finding] = []
    for period in periods:
        found += probing(period.recent, most.get(period.principal, 0), denied_topics, t)
    return merge_adjacent(found)


def volume_spikes(
    base: list[HourRow], recent: list[HourRow], t: Thresholds, factor: Factor | None = None
) -> list[Finding]:
    active = [r for r in base if r.allowed > 0]
    requests = robust([r.allowed for r in active])
    sizes = robust([r.bytes for r in active])
    if not active:
        return []

    def spike(x: float, stats: Stats) -> bool:
        return (
            stats.z(x) >= t.volume_z
            and x >= stats.median * t.volume_ratio
            and x > stats.max * t.volume_over_max
        )

    found = []
    for r in recent:
        rose = factor(r) if factor is not None else 1.0
        if not (spike(r.allowed / rose, requests) or spike(r.bytes / rose, sizes)):
            continue
        z = max(requests.z(r.allowed), sizes.z(r.bytes))
        ratio = r.allowed / max(requests.median, 1.0)
        found.append(
            Finding(
                kinds.VOLUME_SPIKE,
                "high" if z >= 20 or ratio >= 10 else "medium",
                z / t.volume_z,
                r.principal,
                r.hour,
                r.hour + HOUR,
                f"{r.principal} made {r.allowed:,} requests ({_size(r.bytes)}) in an hour; "
                f"its usual hour is {requests.median:.0f} requests",
                {
                    "requests": r.allowed,
                    "bytes": r.bytes,
                    "baseline_median_requests": requests.median,
                    "baseline_mad_requests": requests.mad,
                    "baseline_max_requests": requests.max,
                    "baseline_median_bytes": sizes.median,
                    "robust_z_requests": round(requests.z(r.allowed), 2),
                    "robust_z_bytes": round(sizes.z(r.bytes), 2),
                    "ratio_to_median": round(ratio, 2),
                    "baseline_hours": requests.n,
                    "tenant_factor": round(rose, 2),
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found


def denied_spikes(base: list[HourRow], recent: list[HourRow], t: Thresholds) -> list[Finding]:
    stats = robust([r.denied for r in base if r.total > 0])
    found = []
    for r in recent:
        z = stats.z(r.denied)
        if r.denied < t.denied_min or z < t.denied_z or r.denied <= stats.max * t.denied_over_max:
            continue
        found.append(
            Finding(
                kinds.DENIED_SPIKE,
                "high" if r.denied >= 100 else "medium",
                z / t.denied_z,
                r.principal,
                r.hour,
                r.hour + HOUR,
                f"{r.denied} requests of {r.principal} denied in an hour "
                f"(usually {stats.median:.0f}, at most {stats.max:.0f})",
                {
                    "denied": r.denied,
                    "requests": r.total,
                    "baseline_median": stats.median,
                    "baseline_mad": stats.mad,
                    "baseline_max": stats.max,
                    "robust_z": round(z, 2),
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found


def probing(
    recent: list[HourRow],
    most: int,
    denied_topics: Mapping[tuple[str, int], tuple[str, ...]],
    t: Thresholds,
) -> list[Finding]:
    found = []
    for r in recent:
        names = denied_topics.get((r.principal, r.hour), ())
        distinct = len(names)
        if distinct < t.probing_topics_min or distinct <= most * t.probing_over_max:
            continue
        found.append(
            Finding(
                kinds.PROBING,
                "critical" if distinct >= 20 else "high",
                distinct / t.probing_topics_min,
                r.principal,
                r.hour,
                r.hour + HOUR,
                f"{r.principal} was denied {distinct} different topics in an hour",
                {
                    "distinct_denied_topics": distinct,
                    "denied": r.denied,
                    "baseline_max_distinct": most,
                    "sample_topics": list(names[:10]),
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found


def unusual_hours(
    base: list[HourRow], recent: list[HourRow], t: Thresholds, factor: Factor | None = None
) -> list[Finding]:
    per_hod: Counter[int] = Counter()
    for r in base:
        per_hod[hour_of_day(r.hour)] += r.allowed
    total = sum(per_hod.values())
    if total < t.baseline_min_events:
        return []
    usual = sorted(h for h, n in per_hod.items() if n / total >= t.unusual_share)
    found = []
    for r in recent:
        hod = hour_of_day(r.hour)
        share = per_hod[hod] / total
        rose = factor(r) if factor is not None else 1.0
        if r.allowed / rose < t.unusual_min_requests or share >= t.unusual_share:
            continue
        found.append(
            Finding(
                kinds.UNUSUAL_HOUR,
                "medium",
                r.allowed / t.unusual_min_requests,
                r.principal,
                r.hour,
                r.hour + HOUR,
                f"{r.principal} made {r.allowed} requests at {hod:02d}:00 UTC, an hour that "
                f"held {share:.1%} of its baseline traffic",
                {
                    "requests": r.allowed,
                    "hour_of_day_utc": hod,
                    "baseline_share": round(share, 5),
                    "usual_hours_utc": usual,
                    "baseline_requests": total,
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
