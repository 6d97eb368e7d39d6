"""The compact rows Spark hands the detectors, and the statistics they use. No Spark here."""

from __future__ import annotations

import functools
import ipaddress
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

MAD_SCALE = 1.4826  # makes the MAD comparable to a standard deviation for normal data
HOUR = 3600


class HourRow(NamedTuple):
    """One principal's requests in one clock hour (a named tuple: a job makes hundreds of
    thousands, and a tuple is made in half the time of a frozen dataclass)."""

    principal: str
    hour: int  # epoch seconds at the start of the hour
    tenant: str | None
    allowed: int
    bytes: int  # of the allowed requests, in and out
    denied: int
    total: int


class Single(NamedTuple):
    """A failed login or a throttled request, one by one (a named tuple, as ``HourRow``)."""

    ts: int
    kind: str  # auth_failure | throttled | admin
    principal: str | None
    tenant: str | None
    host: str | None
    throttle_ms: int = 0
    api: str | None = None  # admin: the API (delete_topics, ...)
    targets: tuple[str, ...] = ()  # admin: the topics and groups it named
    allowed: bool = True  # admin: whether the gateway let it through


@dataclass(frozen=True, slots=True)
class HostRow:
    """How often a principal succeeded from one address, before and in the detection window."""

    principal: str
    host: str
    base: int  # successful logins and allowed requests before the window
    seen: int  # the same in the window
    first: int | None  # first time in the window
    last: int


@dataclass(frozen=True, slots=True)
class TopicRow:
    """A topic a principal was first allowed to use in the detection window."""

    principal: str
    topic: str
    first: int
    last: int
    requests: int
    produce: bool
    fetch: bool
    other: bool


@dataclass(frozen=True, slots=True)
class Stats:
    median: float
    mad: float
    max: float
    n: int

    def z(self, x: float) -> float:
        """Robust z-score: ``(x - median) / (1.4826 * MAD)``, the scale floored at
        a tenth of the median and at 1 so a flat baseline does not divide by zero."""
        scale = max(self.mad * MAD_SCALE, self.median * 0.1, 1.0)
        return (x - self.median) / scale


def robust(values: Sequence[float]) -> Stats:
    if not values:
        return Stats(0.0, 0.0, 0.0, 0)
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    return Stats(float(median), float(mad), float(max(values)), len(values))


@functools.lru_cache(maxsize=65536)
def network(host: str) -> str:
    """The /24 of an IPv4 address (``203.0.113``), the /64 of an IPv6 one
    (``2001:db8::/64``), however it is written (compressed, or IPv4-mapped: that is
    the IPv4 address's /24). Anything else is its own network."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is None:
            return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
        address = address.ipv4_mapped
    return str(address).rsplit(".", 1)[0]


def hour_of_day(hour: int) -> int:
    return (hour // HOUR) % 24


def by_key(rows: Iterable[HourRow]) -> Iterable[list[HourRow]]:
    """Consecutive rows of one principal (the input is sorted by principal)."""
    batch: list[HourRow] = []
    for row in rows:
        if batch and row.principal != batch[0].principal:
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch
