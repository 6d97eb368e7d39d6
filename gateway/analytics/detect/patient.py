"""Failed logins that stay under every burst threshold: low and slow, and distributed.

*Slow guessing* chains the failures against one principal that are no more than
``slow_gap_s`` (hours) apart, leaving out those already in a reported burst and those
from the principal's own networks (a stale secret on one of its own hosts fails from
there, regularly). What remains, spread over at least ``slow_span_s``, is someone
else guessing patiently.

*Distributed spraying* looks at the failures from *unfamiliar* addresses (no
successful login or allowed request from them, ever, for anyone), each of which
stands out on its own in no way (at most ``dspray_per_address_max`` failures). Those
close in time, active over the same span and linked by the principals they tried,
form one campaign (sprays against different victims at once stay apart, however
many); a campaign over many principals, from many addresses in several networks, is a
spray, however little each address tried.
Pure Python over ``Single`` rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from itertools import pairwise

from .. import kinds
from ..findings import Finding
from .context import Thresholds
from .rows import Single, network


def slow_guessing(
    failed: Iterable[Single],
    own_networks: Mapping[str, set[str]],
    in_bursts: set[tuple[int, str | None, str | None]],
    t: Thresholds,
) -> list[Finding]:
    """``failed``: failed logins; ``own_networks``: per principal, the networks it
    succeeded from; ``in_bursts``: (ts, principal, host) of failures already reported."""
    per_principal: dict[str, list[Single]] = defaultdict(list)
    for s in failed:
        if s.principal is None or (s.ts, s.principal, s.host) in in_bursts:
            continue
        if s.host is not None and network(s.host) in own_networks.get(s.principal, ()):
            continue
        per_principal[s.principal].append(s)
    found: list[Finding] = []
    for principal, rows in per_principal.items():
        if len(rows) < t.slow_min:
            continue
        rows.sort(key=lambda s: s.ts)
        found += _slow_windows(principal, rows, own_networks.get(principal, set()), t)
    return found


def _slow_windows(
    principal: str, rows: list[Single], own: set[str], t: Thresholds
) -> list[Finding]:
    """One finding per stretch of failures none further than ``slow_gap_s`` apart."""
    found: list[Finding] = []
    stretch: list[Single] = []
    for row in rows:
        if stretch and row.ts - stretch[-1].ts > t.slow_gap_s:
            found += _slow_finding(principal, stretch, own, t)
            stretch = []
        stretch.append(row)
    return found + _slow_finding(principal, stretch, own, t)


def _slow_finding(
    principal: str, rows: list[Single], own: set[str], t: Thresholds
) -> list[Finding]:
    if len(rows) < t.slow_min or rows[-1].ts - rows[0].ts < t.slow_span_s:
        return []
    gaps = [b.ts - a.ts for a, b in pairwise(rows)]
    hosts = Counter(s.host for s in rows if s.host)
    nets = sorted({network(h) for h in hosts})
    hours = (rows[-1].ts - rows[0].ts) / 3600
    return [
        Finding(
            kinds.SLOW_GUESSING,
            "high" if len(rows) >= 3 * t.slow_min else "medium",
            len(rows) / t.slow_min,
            principal,
            rows[0].ts,
            rows[-1].ts,
            f"{len(rows)} failed logins as {principal} spread over {hours:.1f} h "
            f"from {len(hosts)} address(es) outside its own networks, never in a burst",
            {
                "failures": len(rows),
                "hours": round(hours, 1),
                "min_gap_s": min(gaps) if gaps else 0,
                "median_gap_s": sorted(gaps)[len(gaps) // 2] if gaps else 0,
                "addresses": len(hosts),
                "sample_addresses": [h for h, _ in hosts.most_common(5)],
                "networks": nets[:10],
                "principal_networks": sorted(own)[:10],
                "gap_s": t.slow_gap_s,
                "threshold": t.slow_min,
            },
            principal=principal,
            tenant=next((s.tenant for s in rows if s.tenant), None),
        )
    ]


def distributed_spraying(
    failed: Iterable[Single],
    familiar: set[str],
    in_bursts: set[tuple[int, str | None, str | None]],
    t: Thresholds,
) -> list[Finding]:
    """``familiar``: addresses that ever logged in or had a request allowed;
    ``in_bursts``: failures already reported as a burst (a distributed brute force)."""
    strangers = [
        s
        for s in failed
        if s.host is not None
        and s.host not in familiar
        and (s.ts, s.principal, s.host) not in in_bursts
    ]
    per_host = Counter(s.host for s in strangers)
    quiet = sorted(
        (s for s in strangers if per_host[s.host] <= t.dspray_per_address_max),
        key=lambda s: s.ts,
    )
    found: list[Finding] = []
    campaign: list[Single] = []
    for s in [*quiet, None]:
        if s is not None and (not campaign or s.ts - campaign[-1].ts <= t.dspray_gap_s):
            campaign.append(s)
            continue
        found += _split(campaign, t)
        campaign = [s] if s is not None else []
    return found


def _split(rows: list[Single], t: Thresholds) -> list[Finding]:
    """Failures that touch in time may be several campaigns. Networks are grouped first
    by span (each joins the group whose first network's span mostly overlaps its own),
    then each group is cut by whom it tried (:func:`_by_victims`): on a gateway of many
    tenants, sprays against different principals run at the same time, over the same
    span, and time alone cannot part them. Each part that makes a spray is one finding.
    Parts that do not are not pooled: unrelated one-off failures of many tenants fall
    together in time, more of them the more tenants, and pooled they looked like one
    spray (issue 17)."""
    spans: dict[str, list[int]] = {}
    for s in rows:
        span = spans.setdefault(network(s.host or ""), [s.ts, s.ts])
        span[1] = s.ts
    groups: list[tuple[tuple[int, int], list[str]]] = []
    for net, (lo, hi) in sorted(spans.items(), key=lambda kv: kv[1][0] - kv[1][1]):
        best = max(groups, key=lambda g: _overlap(g[0], (lo, hi)), default=None)
        if best is not None and _overlap(best[0], (lo, hi)) >= 0.5:
            best[1].append(net)
        else:
            groups.append(((lo, hi), [net]))
    group_of = {net: i for i, (_, nets) in enumerate(groups) for net in nets}
    members: list[list[Single]] = [[] for _ in groups]
    for s in rows:
        members[group_of[network(s.host or "")]].append(s)
    found: list[Finding] = []
    for part in (part for group in members for part in _by_victims(group, t)):
        finding = _campaign(part, t)
        if finding is not None:
            found.append(finding)
    return found


def _by_victims(rows: list[Single], t: Thresholds) -> list[list[Single]]:
    """``rows`` (sorted by time) cut into connected components of networks: two networks
    are of one campaign when they tried a same principal within ``dspray_gap_s``."""
    parent: dict[str, str] = {}

    def root(net: str) -> str:
        while parent[net] != net:
            parent[net] = parent[parent[net]]
            net = parent[net]
        return net

    last: dict[str, tuple[int, str]] = {}  # principal: (ts, network) of its latest failure
    for s in rows:
        net = network(s.host or "")
        parent.setdefault(net, net)
        if s.principal is None:
            continue
        seen = last.get(s.principal)
        if seen is not None and s.ts - seen[0] <= t.dspray_gap_s:
            parent[root(seen[1])] = root(net)
        last[s.principal] = (s.ts, net)
    parts: dict[str, list[Single]] = defaultdict(list)
    for s in rows:
        parts[root(network(s.host or ""))].append(s)
    return list(parts.values())


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> float:
    """How much of the longer span (at least a minute) the two share."""
    shared = min(a[1], b[1]) - max(a[0], b[0])
    return max(0.0, shared) / max(60, a[1] - a[0], b[1] - b[0])


def _campaign(rows: list[Single], t: Thresholds) -> Finding | None:
    principals = Counter(s.principal for s in rows if s.principal)
    hosts = Counter(s.host for s in rows if s.host)
    nets = Counter(network(h) for h in hosts)
    if (
        len(principals) < t.dspray_principals_min
        or len(hosts) < t.dspray_addresses_min
        or len(nets) < t.dspray_networks_min
    ):
        return None
    # No one principal dominates: that would be a distributed brute force.
    if principals.most_common(1)[0][1] > max(4, len(rows) // 2):
        return None
    entity = min(h for h, n in hosts.items() if n == max(hosts.values()))
    minutes = max(1.0, (rows[-1].ts - rows[0].ts) / 60)
    return Finding(
        kinds.DISTRIBUTED_SPRAYING,
        "critical" if len(principals) >= 20 else "high",
        len(principals) / t.dspray_principals_min,
        entity,
        rows[0].ts,
        rows[-1].ts,
        f"{len(rows)} failed logins against {len(principals)} principals from {len(hosts)} "
        f"unfamiliar addresses in {len(nets)} networks in {minutes:.0f} min",
        {
            "failures": len(rows),
            "principals": len(principals),
            "addresses": len(hosts),
            "networks": len(nets),
            "max_failures_per_address": max(hosts.values()),
            "sample_principals": sorted(principals)[:10],
            "sample_addresses": sorted(hosts)[:20],
            "sample_networks": [n for n, _ in nets.most_common(10)],
            "minutes": round(minutes, 1),
            "threshold": t.dspray_principals_min,
        },
        client_host=entity,
    )
