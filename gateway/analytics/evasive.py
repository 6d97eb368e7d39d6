"""Attacks written to stay under the textbook thresholds, each with its labels.

Low-and-slow guessing, distributed spraying, sustained exfiltration, a new principal
probing outside its tenant, destructive administration by a principal that never
administered. They use :class:`.attacks.Injector`'s helpers and fall in the attack
window like the others.
"""

from __future__ import annotations

from dataclasses import replace

from . import kinds
from .attacks import GUESSED_NAMES, PROBED_WORDS, Injector
from .scenario import HOUR, Principal
from .traffic import poisson

DESTRUCTIVE = ("delete_topics", "delete_records", "delete_groups", "offset_delete")


def _spread(inj: Injector, start: float, end: float, count: int, min_gap_s: float) -> list[int]:
    """``count`` moments (ms) between ``start`` and ``end``, none closer than ``min_gap_s``."""
    rng = inj.rng
    step = (end - start) / count
    times = [
        int((start + i * step + rng.uniform(0, step - min_gap_s)) * 1000) for i in range(count)
    ]
    return sorted(times)


def slow_guessing(inj: Injector, p: Principal) -> None:
    """A few failed logins an hour or less against one principal, for many hours, from a
    handful of addresses in one network."""
    inj._attack_ids += 1
    rng, s = inj.rng, inj.scenario
    hours = rng.randint(8, 18)
    start = rng.randrange(s.attack_from, s.end - hours * HOUR - HOUR, 60)
    count = rng.randint(max(10, hours), hours * 3)
    first = inj.attacker_address()
    net = first.rsplit(".", 1)[0]
    hosts = [first] + [f"{net}.{h}" for h in rng.sample(range(2, 255), rng.randint(0, 2))]
    times = _spread(inj, start, start + hours * HOUR, count, 360)
    for i, at_ms in enumerate(times):
        inj.em.failed_login(p.name, p.tenant, hosts[i % len(hosts)], at_ms, p.mechanism)
    inj._label(
        "slow_guessing",
        kinds.SLOW_GUESSING,
        p.name,
        start,
        times[-1] / 1000,
        attempts=count,
        hours=hours,
        entities=sorted(set(hosts)),
    )


def distributed_spraying(inj: Injector) -> None:
    """Many addresses across several networks, each trying one or two principals once or
    twice."""
    inj._attack_ids += 1
    rng, s = inj.rng, inj.scenario
    minutes = rng.uniform(20, 150)
    start = inj.slot(None) + rng.randrange(0, 30) * 60
    nets = [inj.attacker_address().rsplit(".", 1)[0] for _ in range(rng.randint(3, 6))]
    hosts = sorted(
        {f"{rng.choice(nets)}.{rng.randrange(2, 255)}" for _ in range(rng.randint(15, 40))}
    )
    known = [p.name for p in rng.sample(s.principals, k=min(len(s.principals), 18))]
    names = known + [f"User:{w}" for w in GUESSED_NAMES]
    attempts: list[tuple[str, str]] = []
    for host in hosts:
        for name in rng.sample(names, k=rng.choice((1, 1, 2))):
            attempts += [(host, name)] * rng.choice((1, 1, 2))
    times = sorted(
        int(start * 1000) + rng.randrange(int(minutes * 60_000)) for _ in range(len(attempts))
    )
    rng.shuffle(attempts)
    for (host, name), at_ms in zip(attempts, times, strict=True):
        inj.em.failed_login(name, None, host, at_ms, "SCRAM-SHA-512")
    victims = sorted({name for _, name in attempts})
    inj._label(
        "distributed_spraying",
        kinds.DISTRIBUTED_SPRAYING,
        hosts[0],
        start,
        times[-1] / 1000,
        addresses=len(hosts),
        networks=len(nets),
        principals=len(victims),
        entities=hosts + victims,
    )


def sustained_exfiltration(inj: Injector, p: Principal) -> None:
    """Two to three times the principal's usual reads, hour after hour, for six to
    twelve of its working hours: never the spike of a single hour."""
    inj._attack_ids += 1
    rng, s = inj.rng, inj.scenario
    busy = [h for h in range(s.attack_from, s.end - HOUR, HOUR) if p.expected(h // HOUR % 24) > 5]
    length = rng.randint(6, 12)
    runs = [h for h in busy if all(h + i * HOUR in busy for i in range(length))]
    if not runs:
        length = 6
        runs = [h for h in busy if all(h + i * HOUR in busy for i in range(length))]
    if not runs:
        return
    start = rng.choice(runs)
    factor = rng.uniform(1.2, 1.8)  # extra reads: 2.2 to 2.8 times the usual in all
    scale = rng.uniform(1.0, 1.3)
    host = rng.choice(p.addresses)
    last = start
    for i in range(length):
        hour = start + i * HOUR
        extra = poisson(rng, p.expected(hour // HOUR % 24) * factor)
        times = sorted(hour * 1000 + rng.randrange(HOUR * 1000) for _ in range(max(1, extra)))
        session = inj.em.open(p, times[0], host, 1.5)
        for at_ms in times:
            inj.em.request(p, session, at_ms, api="fetch", scale=scale)
        inj.em.close(p, session)
        last = times[-1] // 1000
    inj._label(
        "sustained_exfiltration",
        kinds.SUSTAINED_VOLUME,
        p.name,
        start,
        last,
        hours=length,
        factor=round(1 + factor, 2),
    )


def new_principal_probing(inj: Injector, model: Principal) -> None:
    """A key created in ``model``'s tenant that at once tries other tenants' topics."""
    inj._attack_ids += 1
    rng, s = inj.rng, inj.scenario
    name = (
        f"User:{model.tenant}-{rng.choice(('tmp', 'ci', 'svc', 'test'))}{rng.randrange(100, 999)}"
    )
    host = inj.attacker_address() if rng.random() < 0.5 else model.addresses[0]
    newbie = replace(
        model,
        name=name,
        api_key_id=f"ak_{rng.getrandbits(24):06x}" if model.api_key_id else None,
        addresses=(host,),
    )
    start = inj.slot(None) + rng.randrange(0, 40) * 60
    minutes = rng.uniform(15, 90)
    others = [t for tenant in s.tenants if tenant.name != model.tenant for t in tenant.topics]
    guessed = [f"{model.tenant}.{w}" for w in PROBED_WORDS]
    targets = rng.sample(others, k=rng.randint(3, 7)) + rng.sample(guessed, k=rng.randint(1, 3))
    plan = [(t, "deny") for t in targets] + [(rng.choice(model.topics), "allow")] * rng.randint(
        3, 12
    )
    rng.shuffle(plan)
    times = inj._times(start, minutes, len(plan))
    session = inj.em.open(newbie, times[0], host, 2)
    for (topic, decision), at_ms in zip(plan, times, strict=True):
        api = rng.choice(("metadata", "fetch")) if decision == "deny" else None
        inj.em.request(newbie, session, at_ms, api=api, topic=topic, decision=decision)
    inj.em.close(newbie, session)
    inj._label(
        "new_principal_probing",
        kinds.NEW_PRINCIPAL_PROBING,
        name,
        start,
        times[-1] / 1000,
        topics=len(targets),
        entities=[host],
    )


def destructive_admin(inj: Injector, p: Principal) -> None:
    """A principal that never administered deletes its tenant's topics, records, groups
    and offsets within half an hour."""
    inj._attack_ids += 1
    rng, s = inj.rng, inj.scenario
    tenant = next(t for t in s.tenants if t.name == p.tenant)
    start = inj.slot(p) + rng.randrange(0, 40) * 60
    count = rng.randint(2, 7)
    times = inj._times(start, rng.uniform(3, 30), count)
    session = inj.em.open(p, times[0], rng.choice(p.addresses), 1)
    for at_ms in times:
        api = rng.choice(DESTRUCTIVE)
        topic = rng.choice(tenant.topics)
        names: tuple[list[str], list[str]] = (
            [],
            [f"{p.tenant}.{rng.choice(('orders', 'billing', 'etl'))}-group"],
        )
        if api in ("delete_topics", "delete_records"):
            names = (rng.sample(list(tenant.topics), k=rng.randint(1, 3)), [])
        elif api == "offset_delete":
            names = ([topic], [f"{p.tenant}.{p.client_id}"])
        inj.em.request(p, session, at_ms, api=api, names=names)
    inj.em.close(p, session)
    inj._label(
        "destructive_admin", kinds.DESTRUCTIVE_ADMIN, p.name, start, times[-1] / 1000, ops=count
    )
