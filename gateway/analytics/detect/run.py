"""Every detector, in the order the job runs them, on rows from Spark or from Python.

Three stages, so the job can run the first two while Spark still works on the topics:
the failed logins and throttling alone (:func:`auth_stage`); the hourly rows and the
addresses (:func:`hourly_stage`, which also gives the :class:`Context` the last stage
needs); the topics and administrative requests (:func:`topic_stage`).
:func:`detect_all` runs all three, for callers that hold every input at once (the
pure-Python path of :mod:`.local`, the tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..findings import Finding
from . import access, auth, baseline, newcomers, patient, peers
from .baseline import Period
from .context import Thresholds
from .rows import HostRow, HourRow, Single, TopicRow, network


def auth_stage(singles: list[Single], t: Thresholds) -> list[Finding]:
    """Bursts of failed logins, spraying from one address, throttle storms (none per
    principal when several of a tenant's principals are throttled at once)."""
    return auth.auth_bursts(singles, t) + tenant_storms(auth.throttle_storms(singles, t), t)


def tenant_storms(storms: list[Finding], t: Thresholds) -> list[Finding]:
    """Storms of ``tenant_storm_principals`` or more principals of one tenant that
    overlap in time are the tenant's quota running dry (its traffic rising together):
    no finding per principal; one tenant-level finding, entity the tenant, when
    ``tenant_events`` asks for it."""
    by_tenant: dict[str, list[Finding]] = {}
    for storm in storms:
        if storm.tenant is not None:
            by_tenant.setdefault(storm.tenant, []).append(storm)
    kept = [s for s in storms if s.tenant is None]
    for tenant, mine in by_tenant.items():
        mine.sort(key=lambda f: f.start)
        group: list[Finding] = []
        for item in [*mine, None]:
            if item is not None and (not group or item.start <= max(g.end for g in group)):
                group.append(item)
                continue
            principals = sorted({g.entity for g in group})
            if len(principals) < t.tenant_storm_principals:
                kept += group
            elif t.tenant_events:
                kept.append(_tenant_storm(tenant, group, principals))
            group = [item] if item is not None else []
    return kept


def _tenant_storm(tenant: str, group: list[Finding], principals: list[str]) -> Finding:
    throttled = sum(int(g.evidence["throttled"]) for g in group)
    total_ms = sum(int(g.evidence["throttle_ms_total"]) for g in group)
    strongest = max(group, key=lambda g: g.score)
    return replace(
        strongest,
        entity=tenant,
        start=min(g.start for g in group),
        end=max(g.end for g in group),
        summary=f"{len(principals)} principals of tenant {tenant} throttled together "
        f"({throttled} responses, {total_ms / 1000:.0f} s): the tenant's quota ran dry",
        evidence={
            "tenant_level": True,
            "principals": len(principals),
            "sample_principals": principals[:10],
            "throttled": throttled,
            "throttle_ms_total": total_ms,
        },
        principal=None,
    )


@dataclass(frozen=True, slots=True)
class Context:
    """What the hourly stage learnt about the principals, for the topic stage."""

    detect_from: int
    data_end: int
    periods: list[Period]
    old_enough: dict[str, str | None]  # principals with a baseline, and their tenants
    tenants: dict[str, str | None]
    first_hour: dict[str, int]
    networks: dict[str, set[str]]  # every network each principal succeeded from
    admin: list[Single]


def hourly_stage(
    singles: list[Single],
    hours: list[HourRow],
    hosts: list[HostRow],
    detect_from: int,
    data_end: int,
    t: Thresholds,
) -> tuple[list[Finding], Context]:
    """Spikes (judged against the tenant's peers too), sustained volume, unusual hours,
    new networks, and the failed logins that stay under the burst thresholds.
    ``hours`` sorted by principal then hour; ``hosts`` per principal and address."""
    first_hour: dict[str, int] = {}
    tenants: dict[str, str | None] = {}
    for row in hours:
        first_hour.setdefault(row.principal, row.hour)
        tenants[row.principal] = tenants.get(row.principal) or row.tenant
    old_enough = {p: tenants[p] for p, h in first_hour.items() if h <= detect_from - t.history_s}

    periods = baseline.periods(hours, detect_from, t)
    usuals = {p.principal: peers.usual(p, detect_from) for p in periods}
    factors = peers.tenant_factors(periods, usuals, data_end)

    def factor(row: HourRow) -> float:
        return factors.rose(usuals[row.principal].tenant, row.hour, row.principal, t)

    findings = baseline.hourly_findings(periods, t, factor)
    # A sustained run may start before the window (its lookback), judged against the time
    # before that: the run's own hours are not its baseline. A principal with too little
    # history before the lookback is judged on the window alone, as the spikes are.
    since = detect_from - t.sustained_lookback_s
    long = [p for p in periods if p.base and p.base[0].hour <= since - t.history_s]
    short = [p for p in periods if not (p.base and p.base[0].hour <= since - t.history_s)]
    usual_before = {p.principal: peers.usual(p, detect_from, since) for p in long}
    factors_before = peers.tenant_factors(long, usual_before, data_end, since)
    findings += peers.sustained_volume(long, usual_before, factors_before, data_end, t, detect_from)
    findings += peers.sustained_volume(short, usuals, factors, data_end, t)
    findings += access.new_addresses(hosts, old_enough, t)

    networks: dict[str, set[str]] = {}
    before: dict[str, set[str]] = {}
    familiar: set[str] = set()
    for h in hosts:
        familiar.add(h.host)
        networks.setdefault(h.principal, set()).add(network(h.host))
        if h.base > 0:
            before.setdefault(h.principal, set()).add(network(h.host))
    own = {p: before.get(p) or nets for p, nets in networks.items()}
    failed = [s for s in singles if s.kind == "auth_failure"]
    reported = _in_bursts(failed, t)
    findings += patient.slow_guessing(failed, own, reported, t)
    findings += patient.distributed_spraying(failed, familiar, reported, t)
    admin = [s for s in singles if s.kind == "admin"]
    context = Context(
        detect_from, data_end, periods, old_enough, tenants, first_hour, networks, admin
    )
    return findings, context


def _in_bursts(failed: list[Single], t: Thresholds) -> set[tuple[int, str | None, str | None]]:
    """The failures the burst detectors report (against one principal or from one address)."""
    members: set[tuple[int, str | None, str | None]] = set()
    for _, burst in auth.episodes(failed, lambda s: s.principal, t.auth_gap_s):
        if len(burst) >= t.auth_principal_min:
            members.update((s.ts, s.principal, s.host) for s in burst)
    for _, burst in auth.episodes(failed, lambda s: s.host, t.auth_gap_s):
        if len(burst) >= t.auth_address_min:
            members.update((s.ts, s.principal, s.host) for s in burst)
    return members


def topic_stage(
    context: Context,
    denied_topics: Mapping[tuple[str, int], tuple[str, ...]],
    new_topics: Iterable[TopicRow],
    topic_users: Mapping[str, Mapping[str, int]],
    t: Thresholds,
) -> list[Finding]:
    """Probing, first access to an established topic, new principals reaching outside
    their tenant, destructive administration. ``topic_users``: per topic, each
    principal's first allowed use of it (the whole input)."""
    c = context
    findings = baseline.probing_findings(c.periods, denied_topics, c.detect_from, t)
    findings += access.first_topic_access(new_topics, c.old_enough, topic_users, t, c.tenants)
    topics_of: dict[str, set[str]] = {}
    for topic, users in topic_users.items():
        for principal in users:
            topics_of.setdefault(principal, set()).add(topic)
    population = newcomers.Population(c.tenants, c.first_hour, c.networks, topics_of)
    fresh = [p for p in c.first_hour if p not in c.old_enough]
    findings += newcomers.new_principal_probing(population, fresh, denied_topics, c.detect_from, t)
    findings += newcomers.destructive_admin(c.admin, population, c.detect_from, t)
    return findings


def detect_all(
    singles: list[Single],
    hours: list[HourRow],
    hosts: list[HostRow],
    denied_topics: Mapping[tuple[str, int], tuple[str, ...]],
    new_topics: Iterable[TopicRow],
    topic_users: Mapping[str, Mapping[str, int]],
    detect_from: int,
    data_end: int,
    t: Thresholds,
) -> list[Finding]:
    findings = auth_stage(singles, t)
    more, context = hourly_stage(singles, hours, hosts, detect_from, data_end, t)
    return findings + more + topic_stage(context, denied_topics, new_topics, topic_users, t)
