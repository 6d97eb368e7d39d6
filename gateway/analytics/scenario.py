"""The simulated world: tenants, their principals, and how each one behaves.

Everything follows from a seed. Addresses are private (``10.<tenant>.<net>.<host>``
for tenants, ``10.2xx.*`` for attackers). Three kinds of principal:

- ``service``: busy around the clock, with a daily swing around its peak hour;
- ``business``: active in one block of hours each day (its tenant's office hours);
- ``batch``: a trickle all day and a nightly job of two hours.

Some run as pods that change address within one /24; some have a client that keeps
asking for a topic it may not use (a steady trickle of denials); busy ones are
throttled now and then.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

TENANT_WORDS = (
    "acme",
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "wonka",
    "tyrell",
    "soylent",
    "cyberdyne",
    "vandelay",
    "wayne",
    "stark",
)
APPS = (
    "orders",
    "payments",
    "billing",
    "inventory",
    "shipping",
    "search",
    "fraud",
    "reports",
    "ledger",
    "pricing",
    "events",
    "audit",
)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
HOUR = 3600


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    tenant: str
    client_id: str
    profile: str  # service | business | batch
    rate: float  # allowed requests per hour at its usual pace
    peak_hour: int  # service: hour of day (UTC) of its daily peak
    active: tuple[int, int]  # business: first active hour, hours active; batch: job hour, 2
    topics: tuple[str, ...]
    spare_topic: str  # a topic of its tenant it never uses (until an injection makes it)
    addresses: tuple[str, ...]  # fixed client addresses (or the pod addresses)
    pods: bool
    mechanism: str
    api_key_id: str | None
    produces: bool
    chronic_denials: float  # denied requests per active hour
    denied_topic: str
    throttle_share: float  # share of requests throttled a little

    def expected(self, hour_of_day: int) -> float:
        """Mean allowed requests in an hour starting at this hour of day."""
        if self.profile == "service":
            swing = math.cos(2 * math.pi * (hour_of_day - self.peak_hour) / 24)
            return self.rate * (1 + 0.45 * swing)
        first, length = self.active
        offset = (hour_of_day - first) % 24
        if self.profile == "batch":
            return self.rate if offset < length else 2.0
        if offset >= length:
            return 0.0
        return self.rate * (0.5 if offset in (0, length - 1) else 1.0)

    def usual_hours(self) -> set[int]:
        """Hours of day with activity in the ordinary week."""
        return {h for h in range(24) if self.expected(h) > 0}


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    index: int
    topics: tuple[str, ...]
    nat: str  # the tenant's NAT address, shared by principals on fixed addresses
    office_start: int  # UTC hour its office day begins


@dataclass(frozen=True, slots=True)
class Scenario:
    seed: int
    start: int  # epoch seconds, on an hour
    hours: int
    attack_hours: int  # attacks are injected in the last hours (the detection window)
    tenants: tuple[Tenant, ...]
    principals: tuple[Principal, ...]

    @property
    def end(self) -> int:
        return self.start + self.hours * HOUR

    @property
    def attack_from(self) -> int:
        return self.end - self.attack_hours * HOUR

    def by_name(self, name: str) -> Principal:
        return next(p for p in self.principals if p.name == name)


def tenant_name(index: int) -> str:
    word = TENANT_WORDS[index % len(TENANT_WORDS)]
    return word if index < len(TENANT_WORDS) else f"{word}{index // len(TENANT_WORDS) + 1}"


def build(
    seed: int, tenants: int, per_tenant: int, hours: int, start: int, attack_hours: int = 24
) -> Scenario:
    if tenants < 1 or per_tenant < 1 or tenants > 200:
        raise ValueError("--tenants must be 1..200 and --principals at least 1")
    if hours < attack_hours + 24:
        raise ValueError(f"--hours must be at least {attack_hours + 24} (a day of baseline)")
    rng = random.Random(seed)
    built_tenants: list[Tenant] = []
    principals: list[Principal] = []
    for t in range(tenants):
        name = tenant_name(t)
        n_topics = max(per_tenant + 2, 6)
        topics = tuple(f"{name}.{APPS[i % len(APPS)]}{_suffix(i)}" for i in range(n_topics))
        tenant = Tenant(name, t, topics, f"10.{t + 1}.0.1", rng.choice((6, 7, 8, 13, 14)))
        built_tenants.append(tenant)
        for p in range(per_tenant):
            principals.append(_principal(rng, tenant, p))
    return Scenario(seed, start, hours, attack_hours, tuple(built_tenants), tuple(principals))


def _suffix(i: int) -> str:
    return "" if i < len(APPS) else f"-{i // len(APPS)}"


def _principal(rng: random.Random, tenant: Tenant, index: int) -> Principal:
    app = APPS[index % len(APPS)] + _suffix(index)
    profile = rng.choices(("service", "business", "batch"), weights=(5, 4, 1.5))[0]
    rate = math.exp(rng.uniform(math.log(18), math.log(70)))
    if profile == "business":
        active = (tenant.office_start + rng.choice((0, 1)), rng.choice((9, 10, 11)))
    elif profile == "batch":
        active = (rng.choice((0, 1, 2, 22, 23)), 2)
    else:
        active = (0, 24)
    own = [t for t in tenant.topics if t != tenant.topics[-1]]
    topics = tuple(rng.sample(own, k=min(len(own), rng.choice((1, 2, 2, 3)))))
    spare = tenant.topics[-1]
    net = 10 + index
    pods = rng.random() < 0.25
    if pods:
        addresses = tuple(f"10.{tenant.index + 1}.{net}.{h}" for h in rng.sample(range(2, 250), 12))
    else:
        count = rng.choice((1, 1, 2, 3))
        addresses = tuple(
            f"10.{tenant.index + 1}.{net}.{h}" for h in rng.sample(range(2, 250), count)
        )
    chronic = rng.uniform(0.5, 2.5) if rng.random() < 0.2 else 0.0
    mechanism = rng.choice(MECHANISMS)
    return Principal(
        name=f"User:{tenant.name}-{app}",
        tenant=tenant.name,
        client_id=f"{app}-{rng.choice(('svc', 'worker', 'app', 'job'))}",
        profile=profile,
        rate=rate,
        peak_hour=rng.randrange(24),
        active=active,
        topics=topics,
        spare_topic=spare,
        addresses=addresses,
        pods=pods,
        mechanism=mechanism,
        api_key_id=f"ak_{rng.getrandbits(24):06x}" if mechanism == "PLAIN" else None,
        produces=rng.random() < 0.5,
        chronic_denials=chronic,
        denied_topic=f"{tenant.name}.{rng.choice(('internal', 'admin', 'legacy'))}",
        throttle_share=0.02 if rate > 40 else 0.0,
    )
