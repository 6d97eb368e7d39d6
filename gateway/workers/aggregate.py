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

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, tuple[tuple[str, str], ...]]
MONOTONIC = frozenset({"counter", "histogram", "summary"})
ADDITIVE = frozenset({
    "kgw_open_connections", "kgw_accesslog_queued", "kgw_quota_buckets_local",
    "kgw_quota_buckets_shared", "kgw_quota_connections_open",
})  # fmt: skip


@dataclass(slots=True)
class Family:
    name: str
    documentation: str
    type: str
    samples: dict[Key, float] = field(default_factory=dict)


Families = dict[str, Family]


def parse(text: str) -> Families:
    """A worker's exposition as families of summed samples (``ValueError`` if malformed)."""
    families: Families = {}
    for metric in text_string_to_metric_families(text):
        family = families.setdefault(
            metric.name, Family(metric.name, metric.documentation, metric.type)
        )
        for sample in metric.samples:
            if sample.name.endswith("_created"):
                continue
            key = (sample.name, tuple(sorted(sample.labels.items())))
            family.samples[key] = family.samples.get(key, 0.0) + sample.value
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


def to_metrics(families: Families) -> list[Metric]:
    """Families as ``prometheus_client`` metrics, for ``generate_latest``."""
    out = []
    for family in sorted(families.values(), key=lambda f: f.name):
        metric = Metric(family.name, family.documentation, family.type)
        for (sample, labels), value in family.samples.items():  # buckets stay in order
            metric.add_sample(sample, dict(labels), value)
        out.append(metric)
    return out
