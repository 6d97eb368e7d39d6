"""Benign changes that look like attacks to a naive detector: none may raise a finding.

- *sale day*: every principal of one tenant works two to four times harder for most
  of a day, and in its busiest hour the tenant's quota throttles them all (one
  tenant-level throttle storm at most);
- *new topic*: a tenant creates a topic and its applications start using it;
- *key rotation*: a principal's traffic moves to a new principal (a new API key or
  user) from the same hosts, and a forgotten instance keeps failing with the old
  secret for a while;
- *address move*: an application moves to a new address in its network;
- *routine administration*: a tenant's operations principal creates topics and
  deletes records and groups every day.

Each trap is recorded (kind, the principals it touches, when) in ``labels.json``'s
``traps``, so a test can check that no finding names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .records import parse_rfc3339, rfc3339_ms
from .scenario import HOUR, Principal, Scenario
from .traffic import Emitter, poisson


@dataclass(frozen=True, slots=True)
class Trap:
    kind: str
    principals: tuple[str, ...]
    start: float
    end: float
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "principals": list(self.principals),
            "start": rfc3339_ms(int(self.start * 1000)),
            "end": rfc3339_ms(int(self.end * 1000)),
            "detail": self.detail,
        }


class Trapper:
    def __init__(self, em: Emitter, scenario: Scenario) -> None:
        self.em = em
        self.rng = em.rng
        self.s = scenario
        self.traps: list[Trap] = []
        self.used: set[str] = set()  # principals no attack may pick

    def _members(self, tenant: str) -> list[Principal]:
        return [p for p in self.s.principals if p.tenant == tenant]

    def _records_of(self, name: str, since_ms: int) -> list[dict[str, Any]]:
        since = rfc3339_ms(since_ms)
        return [r for r in self.em.records if r["principal"] == name and r["ts"] >= since]

    def sale_day(self, tenant: str) -> None:
        rng, s = self.rng, self.s
        hours = rng.randint(8, 14)
        start = rng.randrange(s.attack_from, s.end - hours * HOUR, HOUR)
        factor = rng.uniform(2.0, 4.0)
        members = self._members(tenant)
        peak = rng.randrange(hours)  # the tenant's quota runs dry in its busiest hour
        for p in members:
            for i in range(hours):
                hour = start + i * HOUR
                extra = poisson(rng, p.expected(hour // HOUR % 24) * (factor - 1))
                if not extra:
                    continue
                times = sorted(hour * 1000 + rng.randrange(HOUR * 1000) for _ in range(extra))
                session = self.em.open(p, times[0], rng.choice(p.addresses), 1.5)
                for at_ms in times:
                    ms = rng.randrange(800, 5000) if i == peak else None
                    self.em.request(p, session, at_ms, throttle_ms=ms)
                self.em.close(p, session)
        names = tuple(p.name for p in members)
        self.used.update(names)
        self.traps.append(
            Trap("sale_day", names, start, start + hours * HOUR, {"factor": round(factor, 2)})
        )

    def new_topic(self, tenant: str) -> None:
        rng, s = self.rng, self.s
        topic = f"{tenant}.launch{rng.randrange(10, 99)}"
        created = rng.randrange(s.attack_from, s.end - 8 * HOUR, 60)
        members = self._members(tenant)
        admin = rng.choice(members)
        session = self.em.open(admin, created * 1000, admin.addresses[0], 0.1)
        self.em.request(admin, session, created * 1000 + 500, api="create_topics", topic=topic)
        self.em.close(admin, session)
        adopters = rng.sample(members, k=max(2, int(len(members) * rng.uniform(0.6, 1.0))))
        share = rng.uniform(0.2, 0.5)
        for p in adopters:
            since = (created + rng.randrange(60, 3 * HOUR)) * 1000
            for record in self._records_of(p.name, since):
                if record["api"] in ("produce", "fetch") and rng.random() < share:
                    record["topics"] = [topic]
        names = tuple(p.name for p in adopters)
        self.traps.append(Trap("new_topic", names, created, s.end, {"topic": topic}))

    def key_rotation(self, p: Principal) -> None:
        rng, s = self.rng, self.s
        at = rng.randrange(s.attack_from - 12 * HOUR, s.end - 6 * HOUR, 60)
        new_name = f"{p.name}-{rng.choice(('v2', 'rotated', '2026'))}"
        new_key = f"ak_{rng.getrandbits(24):06x}" if p.api_key_id else None
        for record in self._records_of(p.name, at * 1000):
            record["principal"] = new_name
            if new_key is not None:
                record["api_key_id"] = new_key
        host = rng.choice(p.addresses)  # a forgotten instance with the old secret
        stale = rng.randint(4, 10)
        moment = (at + rng.randrange(600, 3 * HOUR)) * 1000
        for _ in range(stale):
            self.em.failed_login(p.name, p.tenant, host, moment, p.mechanism)
            moment += rng.randrange(15, 60) * 60_000
        self.used.update((p.name, new_name))
        self.traps.append(
            Trap("key_rotation", (p.name, new_name), at, s.end, {"stale_failures": stale})
        )

    def address_move(self, p: Principal) -> None:
        rng, s = self.rng, self.s
        at = rng.randrange(s.attack_from, s.end - 4 * HOUR, 60)
        net = p.addresses[0].rsplit(".", 1)[0]
        taken = {a.rsplit(".", 1)[1] for a in p.addresses}
        new = f"{net}.{rng.choice([h for h in range(2, 255) if str(h) not in taken])}"
        for record in self._records_of(p.name, at * 1000):
            record["client_host"] = new
        self.used.add(p.name)
        self.traps.append(Trap("address_move", (p.name,), at, s.end, {"address": new}))

    def routine_admin(self, p: Principal) -> None:
        """Every day at the same hour: create a topic, trim records, drop a stale group."""
        rng, s = self.rng, self.s
        hod = rng.randrange(24)
        first = s.start + hod * HOUR
        for day_start in range(first, s.end - HOUR, 24 * HOUR):
            at = (day_start + rng.randrange(HOUR)) * 1000
            session = self.em.open(p, at, rng.choice(p.addresses), 0.2)
            for i, api in enumerate(
                rng.sample(
                    ("delete_records", "delete_groups", "create_topics", "offset_delete"),
                    k=rng.randint(2, 4),
                )
            ):
                topic = rng.choice(p.topics)
                names = ([topic], []) if api != "delete_groups" else ([], [f"{p.tenant}.old{i}"])
                self.em.request(p, session, at + i * 2000, api=api, names=names)
            self.em.close(p, session)
        self.used.add(p.name)
        self.traps.append(Trap("routine_admin", (p.name,), s.start, s.end, {"hour_utc": hod}))


def set_traps(em: Emitter, scenario: Scenario) -> tuple[list[Trap], set[str]]:
    """One of each trap (a sale day and a new topic in different tenants, two key
    rotations, two address moves, routine administration in half the tenants); the
    traps and the principals no attack may pick."""
    trapper = Trapper(em, scenario)
    rng = em.rng
    tenants = [t.name for t in scenario.tenants]
    rng.shuffle(tenants)
    trapper.sale_day(tenants[0])
    trapper.new_topic(tenants[-1])
    pool = [p for p in scenario.principals if p.name not in trapper.used]
    rng.shuffle(pool)
    for tenant in tenants[1::2]:
        ops = next((p for p in pool if p.tenant == tenant), None)
        if ops is not None:
            pool.remove(ops)
            trapper.routine_admin(ops)
    for p in pool[:2]:
        trapper.key_rotation(p)
    for p in pool[2:4]:
        trapper.address_move(p)
    return trapper.traps, trapper.used


def parse_trap(data: dict[str, Any]) -> Trap:
    return Trap(
        str(data["kind"]),
        tuple(data["principals"]),
        parse_rfc3339(data["start"]),
        parse_rfc3339(data["end"]),
        dict(data.get("detail") or {}),
    )
