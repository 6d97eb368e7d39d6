"""Judging a principal's hour against its own usual hour *and* its tenant's peers.

A principal's usual volume at each hour of day is the mean of its baseline hours at
that hour of day (hours without a request count as zero). A *tenant factor* for an
hour is the median, over the tenant's other principals active in the window, of
their volume relative to their usual: when a whole tenant rises together (a sale
day) the factor says so, and each principal is judged after dividing its volume by
it. ``sustained_volume`` accumulates over many hours: a run of hours, each well above
the usual and together several times it, finds an exfiltration that never spikes.
Pure Python over the hourly rows.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import kinds
from ..findings import Finding
from .baseline import Period
from .context import Thresholds
from .rows import HOUR, HourRow, hour_of_day


@dataclass(frozen=True, slots=True)
class Usual:
    """A principal's usual requests and bytes per hour of day, and per hour overall."""

    requests: tuple[float, ...]  # 24 values
    bytes: tuple[float, ...]
    mean_requests: float
    mean_bytes: float
    tenant: str | None


def usual(period: Period, detect_from: int, until: int | None = None) -> Usual:
    """The principal's mean volume per hour of day over its baseline: the hours before
    ``detect_from``, or only those before ``until`` (a sustained run's lookback is not
    its own baseline)."""
    until = detect_from if until is None else until
    first = period.base[0].hour if period.base else until
    seen = [0] * 24
    for h in range(first, until, HOUR):
        seen[hour_of_day(h)] += 1
    req = [0.0] * 24
    size = [0.0] * 24
    for r in period.base:
        if r.hour >= until:
            break  # sorted by hour
        req[hour_of_day(r.hour)] += r.allowed
        size[hour_of_day(r.hour)] += r.bytes
    hours = max(1, sum(seen))
    tenant = next((r.tenant for r in period.recent if r.tenant), None)
    return Usual(
        tuple(v / max(1, n) for v, n in zip(req, seen, strict=True)),
        tuple(v / max(1, n) for v, n in zip(size, seen, strict=True)),
        sum(req) / hours,
        sum(size) / hours,
        tenant,
    )


def _ratio(value: float, expected: float, mean: float) -> float:
    """``value`` over ``expected``, the expectation floored at a tenth of the mean hour
    (and at 1) so an hour that is usually idle does not divide by almost nothing."""
    return value / max(expected, 0.1 * mean, 1.0)


@dataclass(frozen=True, slots=True)
class TenantFactors:
    """Per tenant and hour, each active principal's ratio to its usual requests.

    The ratios of a tenant-hour are sorted once, with each principal's own ratios
    (``_index``, filled as asked), so a principal's factor is read off that order with
    its own ratio left out, instead of sorting its peers again for every principal
    and hour."""

    ratios: Mapping[tuple[str, int], list[tuple[str, float]]]
    _index: dict[tuple[str, int], tuple[list[float], dict[str, list[float]]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _risable: dict[tuple[float, int], set[tuple[str, int]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def factor(self, tenant: str | None, hour: int, principal: str) -> tuple[float, int]:
        """The median ratio of the principal's peers in that hour, and how many peers."""
        if tenant is None:
            return 1.0, 0
        key = (tenant, hour)
        index = self._index.get(key)
        if index is None:
            entries = self.ratios.get(key, ())
            by_name: dict[str, list[float]] = {}
            for name, v in entries:
                by_name.setdefault(name, []).append(v)
            index = self._index[key] = (sorted(v for _, v in entries), by_name)
        values, by_name = index
        own = by_name.get(principal, ())
        if len(own) > 1:  # not made by tenant_factors (one ratio per principal and hour)
            peers = [v for name, v in self.ratios.get(key, ()) if name != principal]
            return (float(statistics.median(peers)), len(peers)) if peers else (1.0, 0)
        skip = bisect.bisect_left(values, own[0]) if own else len(values)
        count = len(values) - len(own)
        if count == 0:
            return 1.0, 0

        def nth(i: int) -> float:  # the i-th of the peers' sorted ratios
            return values[i] if i < skip else values[i + 1]

        middle = count // 2
        if count % 2:
            return float(nth(middle)), count
        return float((nth(middle - 1) + nth(middle)) / 2), count

    def rose(self, tenant: str | None, hour: int, principal: str, t: Thresholds) -> float:
        """The factor to divide the principal's volume by (1.0 unless the tenant rose).

        Most tenant-hours cannot rise for anyone (:meth:`_could_rise`): those answer 1.0
        without the principal's median."""
        if tenant is None:
            return 1.0
        limits = (t.tenant_factor_min, t.tenant_peers_min)
        risable = self._risable.get(limits)
        if risable is None:
            risable = self._risable[limits] = self._could_rise(*limits)
        if (tenant, hour) not in risable:
            return 1.0
        value, peers = self.factor(tenant, hour, principal)
        return value if peers >= t.tenant_peers_min and value >= t.tenant_factor_min else 1.0

    def _could_rise(self, factor_min: float, peers_min: int) -> set[tuple[str, int]]:
        """The tenant-hours in which some principal's peers may number ``peers_min`` and
        have a median of ``factor_min`` or more. With one ratio per principal, a
        principal's peers are all the ratios (one outside the tenant-hour) or all but
        its own, whose median is at most that of all but the smallest: below
        ``factor_min``, nobody's factor reaches it. A principal with two ratios in one
        hour (which :func:`tenant_factors` never makes) keeps its tenant-hour in."""
        risable: set[tuple[str, int]] = set()
        for key, entries in self.ratios.items():
            if len(entries) < peers_min or not entries:
                continue
            if len({name for name, _ in entries}) < len(entries):
                risable.add(key)
                continue
            values = sorted(v for _, v in entries)
            highest = statistics.median(values[1:]) if len(values) > 1 else values[0]
            if highest >= factor_min:
                risable.add(key)
        return risable


def tenant_factors(
    periods: Iterable[Period], usuals: Mapping[str, Usual], data_end: int, since: int | None = None
) -> TenantFactors:
    """Each tenant-hour's ratios of its principals, over the window's hours and, from
    ``since`` on, the hours before it that a sustained run may start in (``lookback``)."""
    ratios: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    for period in periods:
        u = usuals[period.principal]
        if u.tenant is None or u.mean_requests <= 0:
            continue
        rows = lookback(period, since)
        counts = {r.hour: r.allowed for r in rows}
        start = rows[0].hour
        for hour in range(start, data_end + 1, HOUR):
            hod = hour_of_day(hour)
            if u.requests[hod] <= 0 and hour not in counts:
                continue  # an hour it is usually idle in and was: says nothing
            value = _ratio(counts.get(hour, 0), u.requests[hod], u.mean_requests)
            ratios[(u.tenant, hour)].append((period.principal, value))
    return TenantFactors(ratios)


def lookback(period: Period, since: int | None) -> list[HourRow]:
    """The period's window hours, with its hours from ``since`` on before the window."""
    if since is None:
        return period.recent
    return [r for r in period.base if r.hour >= since] + period.recent


def sustained_volume(
    periods: Iterable[Period],
    usuals: Mapping[str, Usual],
    factors: TenantFactors,
    data_end: int,
    t: Thresholds,
    detect_from: int | None = None,
) -> list[Finding]:
    """Runs of raised volume that reach into the window (``detect_from`` on). A run may
    start up to ``t.sustained_lookback_s`` before it, so a short window (``kgw analyze
    --follow`` judges the last hour) still sees a run of several hours whole; the run's
    start, part of the finding's id, stays the same while it goes on."""
    since = None if detect_from is None else detect_from - t.sustained_lookback_s
    found: list[Finding] = []
    for period in periods:
        u = usuals[period.principal]
        if u.mean_requests <= 0:
            continue
        runs = _runs(period, u, factors, data_end, t, since)
        if detect_from is not None:
            runs = [f for f in runs if f.end >= detect_from]  # reaches the window
        found += runs
    return found


def _runs(
    period: Period,
    u: Usual,
    factors: TenantFactors,
    data_end: int,
    t: Thresholds,
    since: int | None = None,
) -> list[Finding]:
    window = lookback(period, since)
    rows = {r.hour: r for r in window}
    start = window[0].hour
    hours = list(range(start, data_end + 1, HOUR))
    marks: list[Mark] = []
    for hour in hours:
        hod = hour_of_day(hour)
        row = rows.get(hour)
        got_r = float(row.allowed) if row else 0.0
        got_b = float(row.bytes) if row else 0.0
        factor = factors.rose(u.tenant, hour, period.principal, t)
        exp_r = max(u.requests[hod], 0.1 * u.mean_requests, 1.0) * factor
        exp_b = max(u.bytes[hod], 0.1 * u.mean_bytes, 1.0) * factor
        marks.append((hour, got_r, exp_r, got_b, exp_b, factor))
    found: list[Finding] = []
    run: list[Mark] = []
    quiet = False
    for mark in marks:
        if _high(mark, t):
            run.append(mark)
            quiet = False
        elif run and not quiet:
            run.append(mark)  # one ordinary hour does not end a run
            quiet = True
        elif run:
            found += _close(period.principal, u, run, t)
            run, quiet = [], False
    return found + _close(period.principal, u, run, t)


Mark = tuple[int, float, float, float, float, float]  # hour, requests, expected, bytes, ..


def _high(mark: Mark, t: Thresholds) -> bool:
    _, got_r, exp_r, got_b, exp_b, _ = mark
    return got_r >= exp_r * t.sustained_hour_ratio or got_b >= exp_b * t.sustained_hour_ratio


def _close(principal: str, u: Usual, run: list[Mark], t: Thresholds) -> list[Finding]:
    while run and not _high(run[-1], t):
        run = run[:-1]
    finding = _judge(principal, u, run, t)
    return [finding] if finding is not None else []


def _judge(
    principal: str,
    u: Usual,
    run: list[Mark],
    t: Thresholds,
) -> Finding | None:
    if len(run) < t.sustained_hours_min or sum(m[1] for m in run) < t.sustained_min_requests:
        return None
    got_r = sum(m[1] for m in run)
    exp_r = sum(m[2] for m in run)
    got_b = sum(m[3] for m in run)
    exp_b = sum(m[4] for m in run)
    ratio_r, ratio_b = got_r / exp_r, got_b / exp_b
    excess_r_ok = got_r - exp_r >= max(
        t.sustained_excess_hours * max(u.mean_requests, 1.0), 4 * exp_r**0.5
    )
    excess_b_ok = got_b - exp_b >= t.sustained_excess_hours * max(u.mean_bytes, 1.0)
    by_requests = ratio_r >= t.sustained_ratio and excess_r_ok
    by_bytes = ratio_b >= t.sustained_ratio and excess_b_ok
    if not (by_requests or by_bytes):
        return None
    ratio = max(ratio_r if by_requests else 0.0, ratio_b if by_bytes else 0.0)
    start, end = run[0][0], run[-1][0] + HOUR
    hours = len(run)
    most = max(max(m[1] / m[2], m[3] / m[4]) for m in run)
    return Finding(
        kinds.SUSTAINED_VOLUME,
        "high" if ratio >= 4 or hours >= 8 else "medium",
        ratio / t.sustained_ratio * hours / t.sustained_hours_min,
        principal,
        start,
        end,
        f"{principal} moved {ratio:.1f} times its usual volume for {hours} hours "
        f"({int(got_r):,} requests, {int(got_b):,} bytes; the busiest hour {most:.1f} times "
        "its usual)",
        {
            "hours": hours,
            "requests": int(got_r),
            "expected_requests": round(exp_r, 1),
            "bytes": int(got_b),
            "expected_bytes": round(exp_b),
            "ratio_requests": round(ratio_r, 2),
            "ratio_bytes": round(ratio_b, 2),
            "max_hour_ratio": round(most, 2),
            "tenant_factor_max": round(max(m[5] for m in run), 2),
            "baseline_mean_requests_per_hour": round(u.mean_requests, 1),
        },
        principal=principal,
        tenant=u.tenant,
    )
