"""Principals without a history of their own, and principals doing what they never did.

*Credential lineage*: a new principal whose networks and topics are those of an older
principal of its tenant is that principal's successor (a rotated API key, a renamed
service account): it inherits its history, so doing exactly what the old one did is
not news. *New principal probing*: a principal with no history of its own is judged
against its tenant and peers: the topics it was denied, or used, that no other
principal of its tenant ever used or was denied, beyond what any peer tried.
*Destructive administration*: deletions of topics, records, groups or offsets by a
principal that (with its predecessor) made no administrative request before.
Pure Python.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import kinds
from ..findings import Finding
from .context import Thresholds
from .rows import HOUR, Single

ADMIN_APIS = (
    "create_topics",
    "delete_topics",
    "delete_records",
    "create_acls",
    "delete_acls",
    "alter_configs",
    "incremental_alter_configs",
    "create_partitions",
    "delete_groups",
    "offset_delete",
    "alter_partition_reassignments",
    "alter_client_quotas",
    "alter_user_scram_credentials",
    "delete_share_group_state",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
)
DESTRUCTIVE_APIS = frozenset(
    (
        "delete_topics",
        "delete_records",
        "delete_groups",
        "offset_delete",
        "delete_acls",
        "delete_share_group_state",
        "delete_share_group_offsets",
    )
)


@dataclass(frozen=True, slots=True)
class Population:
    """Who is who: each principal's tenant, first hour, networks and topics."""

    tenants: Mapping[str, str | None]
    first_hour: Mapping[str, int]
    networks: Mapping[str, set[str]]  # where it logged in or was allowed, ever
    topics: Mapping[str, set[str]]  # topics it was allowed to use, ever
    # Each tenant's principals in the order of ``tenants``, made at the first question.
    _members: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def peers(self, principal: str) -> list[str]:
        tenant = self.tenants.get(principal)
        if tenant is None:
            return []
        if not self._members:
            for p, t in self.tenants.items():
                if t is not None:
                    self._members.setdefault(t, []).append(p)
        return [p for p in self._members.get(tenant, ()) if p != principal]

    def predecessor(self, principal: str) -> str | None:
        """The older principal of the same tenant this one took over from, if any: one
        whose networks it shares and whose topics it uses (most of them, or all of its
        own), the closest match."""
        mine_nets = self.networks.get(principal, set())
        mine_topics = self.topics.get(principal, set())
        first = self.first_hour.get(principal, 0)
        best: tuple[float, str] | None = None
        for other in self.peers(principal):
            if self.first_hour.get(other, first) >= first:
                continue
            if not mine_nets & self.networks.get(other, set()):
                continue
            theirs = self.topics.get(other, set())
            if not mine_topics or not theirs:
                continue
            shared = len(mine_topics & theirs)
            if shared < min(len(mine_topics), len(theirs)) * 0.5 or shared == 0:
                continue
            score = shared / len(mine_topics | theirs)
            if best is None or (score, other) > best:
                best = (score, other)
        return best[1] if best else None


def new_principal_probing(
    population: Population,
    newcomers: Iterable[str],
    denied_topics: Mapping[tuple[str, int], tuple[str, ...]],
    detect_from: int,
    t: Thresholds,
) -> list[Finding]:
    """``newcomers``: principals too new to have a baseline of their own. Their peers
    are judged by their baseline (before ``detect_from``): what the window holds may
    be another attack."""
    denied_of: dict[str, dict[str, int]] = defaultdict(dict)  # principal -> topic -> hour
    usual: dict[str, set[str]] = defaultdict(set)  # principal -> topics denied before
    for (principal, hour), names in denied_topics.items():
        for name in names:
            known = denied_of[principal].get(name)
            denied_of[principal][name] = hour if known is None else min(known, hour)
            if hour < detect_from:
                usual[principal].add(name)
    found: list[Finding] = []
    for principal in newcomers:
        peers = population.peers(principal)
        if not peers:
            continue  # a tenant of its own: nothing to judge it against
        own: set[str] = set()
        for peer in peers:
            own |= population.topics.get(peer, set()) | usual.get(peer, set())
        predecessor = population.predecessor(principal)
        tried = dict(denied_of.get(principal, {}))
        for name in population.topics.get(principal, set()) - own:
            tried.setdefault(name, -1)  # used, not denied: when is not known here
        foreign = {n: h for n, h in tried.items() if n not in own}
        if len(foreign) < t.newp_foreign_min:
            continue
        peer_most = max((len(usual.get(p, ())) for p in peers), default=0)
        if len(foreign) < peer_most + t.newp_over_peers:
            continue
        hours = sorted(h for h in foreign.values() if h >= 0) or [
            population.first_hour.get(principal, 0)
        ]
        sample = sorted(foreign)
        found.append(
            Finding(
                kinds.NEW_PRINCIPAL_PROBING,
                "critical" if len(foreign) >= 10 else "high",
                len(foreign) / t.newp_foreign_min,
                principal,
                hours[0],
                hours[-1] + HOUR,
                f"{principal}, a principal with no history, reached {len(foreign)} topics "
                f"no other principal of its tenant uses (its {len(peers)} peers were usually "
                f"denied at most {peer_most})",
                {
                    "outside_topics": len(foreign),
                    "denied_outside_topics": sum(1 for h in foreign.values() if h >= 0),
                    "sample_topics": sample[:10],
                    "tenant_topics_known": len(own),
                    "peers": len(peers),
                    "peer_max_denied_topics": peer_most,
                    "first_seen": population.first_hour.get(principal),
                    "predecessor": predecessor,
                },
                principal=principal,
                tenant=population.tenants.get(principal),
            )
        )
    return found


def destructive_admin(
    admin: Iterable[Single], population: Population, detect_from: int, t: Thresholds
) -> list[Finding]:
    """``admin``: the administrative requests (``Single`` of kind ``admin``), allowed or
    not, of the whole input. History is what was *allowed* before the window: a refused
    request proves no administrative role (and would let an attacker make one cheaply).
    Deletions are judged per episode (requests ≤ ``admin_gap_s`` apart) and, when no
    episode is enough, over the whole window, so spacing them out does not hide them."""
    history: set[str] = set()
    recent: dict[str, list[Single]] = defaultdict(list)
    for s in admin:
        if s.principal is None:
            continue
        if s.ts < detect_from:
            if s.allowed:
                history.add(s.principal)
        elif s.api in DESTRUCTIVE_APIS:
            recent[s.principal].append(s)
    found: list[Finding] = []
    for principal, rows in recent.items():
        if principal in history:
            continue
        predecessor = population.predecessor(principal)
        if predecessor is not None and predecessor in history:
            continue  # a rotated key of an administrator
        rows.sort(key=lambda s: s.ts)
        episode: list[Single] = []
        before = len(found)
        for item in [*rows, None]:
            if item is not None and (not episode or item.ts - episode[-1].ts <= t.admin_gap_s):
                episode.append(item)
                continue
            finding = _admin_finding(principal, episode, population, predecessor, t)
            if finding is not None:
                found.append(finding)
            episode = [item] if item is not None else []
        if len(found) == before:  # spaced out: no episode was enough, the window is
            finding = _admin_finding(principal, rows, population, predecessor, t)
            if finding is not None:
                found.append(finding)
    return found


def _admin_finding(
    principal: str,
    rows: list[Single],
    population: Population,
    predecessor: str | None,
    t: Thresholds,
) -> Finding | None:
    targets = sorted({name for s in rows for name in s.targets})
    if len(rows) < t.admin_ops_min and len(targets) < t.admin_targets_min:
        return None
    apis = sorted({s.api for s in rows if s.api})
    allowed = sum(1 for s in rows if s.allowed)
    minutes = max(1.0, (rows[-1].ts - rows[0].ts) / 60)
    return Finding(
        kinds.DESTRUCTIVE_ADMIN,
        "critical" if allowed else "high",
        max(len(rows) / t.admin_ops_min, len(targets) / t.admin_targets_min),
        principal,
        rows[0].ts,
        rows[-1].ts,
        f"{principal}, which never made an administrative request before, issued "
        f"{len(rows)} deletions ({', '.join(apis)}) on {len(targets)} topics or groups "
        f"in {minutes:.0f} min; {allowed} allowed",
        {
            "requests": len(rows),
            "allowed": allowed,
            "apis": apis,
            "targets": len(targets),
            "sample_targets": targets[:10],
            "minutes": round(minutes, 1),
            "admin_requests_before": 0,
            "predecessor": predecessor,
            "first_seen": population.first_hour.get(principal),
        },
        principal=principal,
        tenant=population.tenants.get(principal),
    )
