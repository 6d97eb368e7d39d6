"""The job's rollups in plain Python, for record dicts already in memory (no Spark).

The same rows :mod:`..rollups` makes in Spark, by the same rules (``docs/access-log.md``
fields; a failed login counts against the identity it claimed, :mod:`..claimed`), so
the detectors can run where there is no JVM: the pure-tier evaluation test, small
logs. Thousands of records a second, not millions: the job is for real volumes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..findings import Finding, rank
from ..flags import ALLOWED, DENIED, FULLY_ALLOWED
from ..records import parse_rfc3339
from .context import Thresholds
from .newcomers import ADMIN_APIS
from .rows import HOUR, HostRow, HourRow, Single, TopicRow
from .run import detect_all

ADMIN = frozenset(ADMIN_APIS)


def claimed_login(record: Mapping[str, Any]) -> str | None:
    """Whom a failed login was against, as :func:`..claimed.claimed_login` names it."""
    claimed = record.get("claimed")
    if not claimed:
        return record.get("principal")
    return str(claimed) if record.get("sasl_mechanism") == "PLAIN" else f"User:{claimed}"


@dataclass(slots=True)
class Rolled:
    singles: list[Single]
    hours: list[HourRow]
    hosts: list[HostRow]
    denied_topics: dict[tuple[str, int], tuple[str, ...]]
    new_topics: list[TopicRow]
    topic_users: dict[str, dict[str, int]]
    data_start: int
    data_end: int
    detect_from: int


def rollup(records: Iterable[Mapping[str, Any]], detect_hours: float = 24.0) -> Rolled:
    rows = []
    for r in records:
        if r.get("ts") is None or r.get("type") not in ("request", "connection"):
            continue
        rows.append((int(parse_rfc3339(r["ts"])), r))
    if not rows:
        raise ValueError("no access-log records")
    start = min(ts for ts, _ in rows)
    end = max(ts for ts, _ in rows)
    detect_from = max(-(-int(end - detect_hours * HOUR) // HOUR) * HOUR, start)
    window = detect_from // HOUR * HOUR

    singles: list[Single] = []
    per_hour: dict[tuple[str, int], list[Any]] = {}
    per_host: dict[tuple[str, str], list[Any]] = {}
    per_topic: dict[tuple[str, int, str], list[Any]] = {}
    for ts, r in rows:
        hour = ts // HOUR * HOUR
        request = r["type"] == "request"
        decision = r.get("decision")
        allowed = request and decision in ALLOWED
        principal = r.get("principal")
        host = r.get("client_host")
        failure = r.get("event") == "auth" and r.get("outcome") == "failure"
        success = r.get("event") == "auth" and r.get("outcome") == "success"
        topics = tuple(r.get("topics") or ())
        if failure:
            singles.append(Single(ts, "auth_failure", claimed_login(r), r.get("tenant"), host))
        elif request and r.get("api") in ADMIN:
            targets = topics + tuple(r.get("groups") or ())
            singles.append(
                Single(ts, "admin", principal, r.get("tenant"), host, 0, r["api"], targets, allowed)
            )
        elif request and (r.get("throttle_ms") or 0) > 0:
            singles.append(
                Single(ts, "throttled", principal, r.get("tenant"), host, r["throttle_ms"])
            )
        if principal is None:
            continue
        if request:
            acc = per_hour.setdefault((principal, hour), [r.get("tenant"), 0, 0, 0, 0])
            acc[0] = max(acc[0] or "", r.get("tenant") or "") or None
            acc[4] += 1
            if allowed:
                acc[1] += 1
                acc[2] += (r.get("bytes_in") or 0) + (r.get("bytes_out") or 0)
            if decision in DENIED:
                acc[3] += 1
        if (success or allowed) and host is not None:
            acc = per_host.setdefault((principal, host), [0, 0, None, ts])
            if hour >= window:
                acc[1] += 1
                acc[2] = ts if acc[2] is None else min(acc[2], ts)
            else:
                acc[0] += 1
            acc[3] = max(acc[3], ts)
        fully = request and decision in FULLY_ALLOWED
        if topics and (fully or (request and decision in DENIED)):
            api = r.get("api")
            for topic in topics:
                acc = per_topic.setdefault((principal, hour, topic), [0, None, None, set(), 0])
                if fully:
                    acc[0] += 1
                    acc[1] = ts if acc[1] is None else min(acc[1], ts)
                    acc[2] = ts if acc[2] is None else max(acc[2], ts)
                    acc[3].add(api if api in ("produce", "fetch") else "other")
                else:
                    acc[4] += 1

    hours = [HourRow(p, h, v[0], v[1], v[2], v[3], v[4]) for (p, h), v in sorted(per_hour.items())]
    hosts = [HostRow(p, h, *v) for (p, h), v in sorted(per_host.items())]
    denied: dict[tuple[str, int], list[str]] = defaultdict(list)
    users: dict[str, dict[str, int]] = defaultdict(dict)
    firsts: dict[tuple[str, str], list[Any]] = {}
    for (p, h, topic), (n, first, last, apis, n_denied) in sorted(per_topic.items()):
        if n_denied:
            denied[(p, h)].append(topic)
        if not n:
            continue
        users[topic][p] = min(users[topic].get(p, first), first)
        acc = firsts.setdefault((p, topic), [first, last, 0, set()])
        acc[0], acc[1] = min(acc[0], first), max(acc[1], last)
        if h >= window:
            acc[2] += n
            acc[3] |= apis
    new_topics = [
        TopicRow(p, topic, f, last, n, "produce" in apis, "fetch" in apis, "other" in apis)
        for (p, topic), (f, last, n, apis) in sorted(firsts.items())
        if f >= detect_from
    ]
    return Rolled(
        singles,
        hours,
        hosts,
        {k: tuple(v) for k, v in denied.items()},
        new_topics,
        dict(users),
        start,
        end,
        detect_from,
    )


def detect_records(
    records: Iterable[Mapping[str, Any]], detect_hours: float = 24.0, t: Thresholds | None = None
) -> list[Finding]:
    """Every detector over ``records`` (schema v1 dicts), ranked, as the job ranks them."""
    t = t or Thresholds()
    rolled = rollup(records, detect_hours)
    return rank(
        detect_all(
            rolled.singles,
            rolled.hours,
            rolled.hosts,
            rolled.denied_topics,
            rolled.new_topics,
            rolled.topic_users,
            rolled.detect_from,
            rolled.data_end,
            t,
        )
    )
