"""Where from and what: new or rare client networks, a principal's first access to a topic.

An address counts for a principal once it authenticated successfully or had a
request allowed; failed logins never make an address familiar. Addresses are
judged by their network (IPv4 /24, IPv6 first four groups), so pods that move
inside a known subnet are not news. Pure Python over the rows Spark rolled up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

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
            if r.base > t.rare_address_max or per_net[net] >= total * t.rare_share:
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
    topics: Iterable[TopicRow], old_enough: dict[str, str | None]
) -> list[Finding]:
    found = []
    for r in topics:
        if r.principal not in old_enough:
            continue  # a new principal's every access is a first one
        apis = [
            name
            for name, used in (("produce", r.produce), ("fetch", r.fetch), ("other", r.other))
            if used
        ]
        found.append(
            Finding(
                kinds.FIRST_TOPIC,
                "high" if r.produce else "medium" if r.fetch else "low",
                1.0 + r.requests / 100,
                r.principal,
                r.first,
                r.last,
                f"{r.principal} used topic {r.topic} for the first time "
                f"({r.requests} requests: {', '.join(apis)})",
                {"topic": r.topic, "requests": r.requests, "apis": apis},
                principal=r.principal,
                tenant=old_enough[r.principal],
            )
        )
    return found
