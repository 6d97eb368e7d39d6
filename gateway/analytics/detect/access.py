"""Where from and what: new or rare client networks, a principal's first access to a topic.

An address counts for a principal once it authenticated successfully or had a
request allowed; failed logins never make an address familiar. Addresses are
judged by their network (IPv4 /24, IPv6 /64: ``rows.network``), so pods that move
inside a known subnet are not news. Pure Python over the rows Spark rolled up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from .. import kinds
from ..findings import Finding
from .context import Thresholds
from .rows import HostRow, TopicRow, network


def new_addresses(
    hosts: Iterable[HostRow], old_enough: dict[str, str | None], t: Thresholds
) -> list[Finding]:
    """``old_enough``: principals with enough history, and their tenants."""
    per_principal: dict[str, list[HostRow]] = defaultdict(list)
    for row in hosts:
        if row.principal in old_enough:
            per_principal[row.principal].append(row)
    found = []
    for principal, rows in per_principal.items():
        total = sum(r.base for r in rows)
        if total < t.baseline_min_events:
            continue
        per_net: dict[str, int] = defaultdict(int)
        for r in rows:
            per_net[network(r.host)] += r.base
        known = sum(1 for n in per_net.values() if n > 0)
        for r in rows:
            net = network(r.host)
            if r.seen == 0 or r.first is None:
                continue
            # Rare: a network with a handful of baseline events, or a tiny share of them.
            few = per_net[net] <= t.rare_address_max and per_net[net] < total * 0.05
            if not few and (r.base > t.rare_address_max or per_net[net] >= total * t.rare_share):
                continue
            new = per_net[net] == 0
            what = "a network it never used before" if new else "a network it has rarely used"
            found.append(
                Finding(
                    kinds.NEW_ADDRESS,
                    "high" if new else "medium",
                    1.0 + r.seen / 10 if new else 0.5 + r.seen / 20,
                    principal,
                    r.first,
                    r.last,
                    f"{principal} connected from {r.host}, {what} "
                    f"({r.seen} successful logins and requests)",
                    {
                        "address": r.host,
                        "network": net,
                        "events_from_address": r.seen,
                        "baseline_events_from_address": r.base,
                        "baseline_events_from_network": per_net[net],
                        "baseline_events": total,
                        "baseline_networks": known,
                        "new": new,
                    },
                    principal=principal,
                    client_host=r.host,
                    tenant=old_enough[principal],
                )
            )
    return found


def first_topic_access(
    topics: Iterable[TopicRow],
    old_enough: dict[str, str | None],
    topic_users: Mapping[str, Mapping[str, int]] | None = None,
    t: Thresholds | None = None,
    tenants: Mapping[str, str | None] | None = None,
) -> list[Finding]:
    """A principal with history using a topic for the first time, when others have
    used that topic for a while (``topic_users``: per topic, each principal's first
    allowed use). A topic nobody used until recently is new, not someone else's: its
    first users are not moving laterally. Without ``topic_users`` every first use counts."""
    t = t or Thresholds()
    found = []
    for r in topics:
        if r.principal not in old_enough:
            continue  # a new principal's every access is a first one
        users = dict(topic_users.get(r.topic, {})) if topic_users is not None else None
        evidence: dict[str, object] = {"topic": r.topic, "requests": r.requests}
        if users is not None:
            users.pop(r.principal, None)
            earlier = {p: ts for p, ts in users.items() if ts <= r.first - t.topic_new_s}
            if not earlier:
                continue  # a topic nobody used a while before: new, not lateral
            known = tenants if tenants is not None else old_enough
            owners = sorted({known.get(p) or "" for p in earlier} - {""})
            evidence.update(
                topic_first_used=min(earlier.values()),
                topic_users_before=len(earlier),
                topic_tenants=owners,
                other_tenant=bool(owners) and old_enough[r.principal] not in owners,
            )
        apis = [
            name
            for name, used in (("produce", r.produce), ("fetch", r.fetch), ("other", r.other))
            if used
        ]
        evidence["apis"] = apis
        found.append(
            Finding(
                kinds.FIRST_TOPIC,
                "high"
                if r.produce or evidence.get("other_tenant")
                else "medium"
                if r.fetch
                else "low",
                1.0 + r.requests / 100,
                r.principal,
                r.first,
                r.last,
                f"{r.principal} used topic {r.topic} for the first time "
                f"({r.requests} requests: {', '.join(apis)})",
                evidence,
                principal=r.principal,
                tenant=old_enough[r.principal],
            )
        )
    return found
