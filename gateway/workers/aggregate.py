"""One ``/metrics`` for the whole process group: the workers' expositions summed (no I/O).

Every worker keeps its own registry (the gateway's counters, histograms and the
collectors read at scrape time). The supervisor reads each worker's text
exposition and ``merge`` adds samples with the same name and labels: counters,
histogram buckets/sums/counts and gauges (open connections, queued records) are
all additive across processes. ``*_created`` samples are dropped (one process's
start time says nothing about the group).

Gauges are of two kinds. Those that count something held by one process (open
connections, queued access-log records, quota buckets and connections: ``ADDITIVE``)
are summed; every other gauge describes shared state each worker observes on its own
(Redis up, degraded, timestamps, consumer lag, cluster health) and is the maximum
over the workers — the minimum for ``*_up`` (up only if up everywhere).

A worker that dies takes its counters with it; so that the group's counters never
go backwards, ``Retired`` keeps the last figures read from each worker and adds
the monotonic ones (counters and histograms, not gauges) of the dead to every
later answer. What a dead worker counted after its last scrape is lost (the
supervisor reads every few seconds).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..observability.metrics import sample_number

# (sample name, its labels as written between the braces: "" for none). Every worker
# writes a series' labels the same way (sorted names, the same escaping), so the text
# itself is the key: nothing is unescaped, and it is written back as it was read.
Key = tuple[str, str]
MONOTONIC = frozenset({"counter", "histogram", "summary"})
ADDITIVE = frozenset({
    "kgw_open_connections", "kgw_accesslog_queued", "kgw_quota_buckets_local",
    "kgw_quota_buckets_shared", "kgw_quota_connections_open",
})  # fmt: skip


@dataclass(slots=True)
class Family:
    name: str  # as the TYPE line names it (a counter's with ``_total``)
    documentation: str  # as the HELP line has it (escaped)
    type: str
    samples: dict[Key, float] = field(default_factory=dict)


Families = dict[str, Family]


def parse(text: str) -> Families:
    """A worker's exposition as families of summed samples (``ValueError`` if malformed).

    Only the text format the gateway writes is read (``prometheus_client``'s
    ``generate_latest`` and ``RequestSeries.render``: HELP and TYPE before a family's
    samples, no timestamps), line by line: with thousands of tenants a worker writes
    ~70,000 samples, which ``prometheus_client``'s own parser took 1 to 2 s to read."""
    families: Families = {}
    helps: dict[str, str] = {}
    family: Family | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] == "HELP":
                helps[parts[2]] = parts[3] if len(parts) == 4 else ""
            elif len(parts) == 4 and parts[1] == "TYPE":
                name = parts[2]
                family = None if name.endswith("_created") else families.setdefault(
                    name, Family(name, helps.get(name, ""), parts[3])
                )  # fmt: skip
            continue
        head, space, value = line.rpartition(" ")
        brace = head.find("{")
        if brace < 0:
            name, labels = head, ""
        elif head.endswith("}"):
            name, labels = head[:brace], head[brace + 1 : -1]
        else:
            raise ValueError(f"line {number}: labels not closed")
        if not space or not name or " " in name:
            raise ValueError(f"line {number}: not a sample")
        try:
            figure = float(value)
        except ValueError:
            raise ValueError(f"line {number}: {value[:20]!r} is not a number") from None
        if name.endswith("_created"):  # one process's start time says nothing of the group
            continue
        if family is None or not name.startswith(family.name.removesuffix("_total")):
            family = families.setdefault(name, Family(name, helps.get(name, ""), "untyped"))
        key = (name, labels)
        family.samples[key] = family.samples.get(key, 0.0) + figure
    return families


def merge(groups: Iterable[Families], monotonic_only: bool = False) -> Families:
    """The sum of several workers' families (``monotonic_only``: counters and histograms)."""
    total: Families = {}
    for families in groups:
        for name, family in families.items():
            if monotonic_only and family.type not in MONOTONIC:
                continue
            into = total.get(name)
            if into is None:
                into = total[name] = Family(name, family.documentation, family.type)
                into.samples = dict(family.samples)
                continue
            combine = _combiner(family)
            for key, value in family.samples.items():
                old = into.samples.get(key)
                into.samples[key] = value if old is None else combine(old, value)
    return total


def _combiner(family: Family) -> Callable[[float, float], float]:
    if family.type != "gauge" or family.name in ADDITIVE:
        return operator.add
    return min if family.name.endswith("_up") else max


@dataclass(slots=True)
class Retired:
    """The last figures of live workers (by pid), and the sum of the dead ones' counters."""

    last: dict[int, Families] = field(default_factory=dict)
    dead: Families = field(default_factory=dict)

    def seen(self, pid: int, families: Families) -> None:
        self.last[pid] = families

    def gone(self, pid: int) -> None:
        families = self.last.pop(pid, None)
        if families is not None:
            self.dead = merge([self.dead, families], monotonic_only=True)

    def group(self, live: Sequence[Families]) -> Families:
        return merge([*live, self.dead])


def render(families: Families) -> str:
    """Families in the text format, by name; each family's samples in the order read
    (a histogram's buckets stay in order)."""
    out: list[str] = []
    for family in sorted(families.values(), key=lambda f: f.name):
        if family.documentation:
            out.append(f"# HELP {family.name} {family.documentation}\n")
        out.append(f"# TYPE {family.name} {family.type}\n")
        for (sample, labels), value in family.samples.items():
            braced = f"{{{labels}}}" if labels else ""
            out.append(f"{sample}{braced} {sample_number(value)}\n")
    return "".join(out)
