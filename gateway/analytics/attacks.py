"""Injected attacks, each with the labels of the detectors it should set off.

Attacks fall in the scenario's last ``attack_hours`` (the window ``kgw analyze``
reports on by default). Each victim principal suffers one attack (password
spraying aside, which tries many names at once), so one attack's traffic does not
pass for another's.
"""

from __future__ import annotations

from collections.abc import Callable

from . import kinds
from .labels import Label
from .records import rfc3339_ms
from .scenario import HOUR, Principal, Scenario
from .traffic import Emitter, poisson

GUESSED_NAMES = ("admin", "kafka", "root", "test", "service", "superuser", "backup", "dev")
PROBED_WORDS = ("secrets", "payroll", "customers", "keys", "users", "hr", "finance", "pii")


class Injector:
    def __init__(self, em: Emitter, scenario: Scenario) -> None:
        self.em = em
        self.rng = em.rng
        self.scenario = scenario
        self.labels: list[Label] = []
        self._used_addresses: set[str] = set()
        self._attack_ids = 0

    # -- helpers ---------------------------------------------------------------

    def _label(
        self, attack: str, detector: str, entity: str, start: float, end: float, **detail: object
    ) -> None:
        self.labels.append(
            Label(
                f"L{len(self.labels) + 1:04d}",
                attack,
                detector,
                entity,
                start,
                end,
                {"attack_id": self._attack_ids, **detail},
            )
        )

    def attacker_address(self) -> str:
        while True:
            rng = self.rng
            address = f"10.{rng.randrange(200, 250)}.{rng.randrange(256)}.{rng.randrange(2, 255)}"
            if address not in self._used_addresses:
                self._used_addresses.add(address)
                return address

    def slot(self, p: Principal | None, fits: Callable[[int], bool] | None = None) -> int:
        """The start (epoch s) of an hour in the attack window whose hour of day ``fits``."""
        s = self.scenario
        hours = [
            h
            for h in range(s.attack_from, s.end - HOUR, HOUR)
            if fits is None or fits((h // HOUR) % 24)
        ]
        if not hours:
            raise ValueError(f"no hour in the attack window suits {p.name if p else 'it'}")
        return self.rng.choice(hours)

    def _busy(self, p: Principal, floor: float) -> Callable[[int], bool]:
        """Hours the principal is at work: a batch job's hours, not its idle trickle."""
        return lambda hod: p.expected(hod) >= max(floor, 0.5 * p.rate)

    def _session_requests(
        self,
        p: Principal,
        host: str,
        times: list[int],
        *,
        api: str | None = None,
        topic: str | None = None,
        decision: str = "allow",
    ) -> None:
        if not times:
            return
        session = self.em.open(p, times[0], host, 4)
        for at_ms in times:
            self.em.request(p, session, at_ms, api=api, topic=topic, decision=decision)
        self.em.close(p, session)

    def _times(self, start_s: float, minutes: float, count: int) -> list[int]:
        base = int(start_s * 1000)
        return sorted(base + self.rng.randrange(int(minutes * 60_000)) for _ in range(count))

    # -- attacks ---------------------------------------------------------------

    def brute_force(self, p: Principal, distributed: bool) -> None:
        self._attack_ids += 1
        start = self.slot(p) + self.rng.randrange(0, 50) * 60
        total = self.rng.randint(30, 80)
        minutes = self.rng.uniform(2, 4)
        hosts = (
            [self.attacker_address() for _ in range(self.rng.randint(12, 25))]
            if distributed
            else [self.attacker_address()]
        )
        times = self._times(start, minutes, total)
        for i, at_ms in enumerate(times):
            self.em.failed_login(p.name, p.tenant, hosts[i % len(hosts)], at_ms, p.mechanism)
        end = times[-1] / 1000
        attack = "brute_force_distributed" if distributed else "brute_force"
        self._label(
            attack,
            kinds.AUTH_BURST_PRINCIPAL,
            p.name,
            start,
            end,
            attempts=total,
            entities=sorted(hosts),
        )
        if not distributed:
            self._label(attack, kinds.AUTH_BURST_ADDRESS, hosts[0], start, end, attempts=total)

    def spraying(self) -> None:
        self._attack_ids += 1
        rng = self.rng
        host = self.attacker_address()
        start = self.slot(None) + rng.randrange(0, 50) * 60
        known = rng.sample(self.scenario.principals, k=min(len(self.scenario.principals), 14))
        names = [p.name for p in known] + [
            f"User:{w}" for w in rng.sample(GUESSED_NAMES, k=rng.randint(3, 6))
        ]
        attempts = [name for name in names for _ in range(rng.choice((1, 1, 2)))]
        times = self._times(start, rng.uniform(4, 8), len(attempts))
        for name, at_ms in zip(attempts, times, strict=True):
            self.em.failed_login(name, None, host, at_ms, "SCRAM-SHA-512")
        end = times[-1] / 1000
        self._label("spraying", kinds.SPRAYING, host, start, end, principals=len(names))
        self._label("spraying", kinds.AUTH_BURST_ADDRESS, host, start, end, attempts=len(times))

    def new_address(self, p: Principal, rare: bool) -> None:
        self._attack_ids += 1
        rng, host = self.rng, self.attacker_address()
        if rare:  # the address was tried once, quietly, during the baseline
            s = self.scenario
            early = [
                h
                for h in range(s.start, s.attack_from - HOUR, HOUR)
                if p.expected((h // HOUR) % 24) > 0
            ]
            moment = rng.choice(early) + rng.randrange(HOUR)
            self._session_requests(p, host, self._times(moment, 5, rng.randint(1, 2)))
        start = self.slot(p, self._busy(p, 1)) + rng.randrange(0, 20) * 60
        minutes = rng.uniform(40, 150)
        count = max(8, poisson(rng, p.rate * 0.6 * minutes / 60))
        times = self._times(start, minutes, count)
        self._session_requests(p, host, times)
        self._label(
            "stolen_credentials",
            kinds.NEW_ADDRESS,
            p.name,
            start,
            times[-1] / 1000,
            address=host,
            rare=rare,
        )

    def volume_spike(self, p: Principal) -> None:
        self._attack_ids += 1
        rng = self.rng
        start = self.slot(p, self._busy(p, 1)) + rng.randrange(3, 10) * 60
        count = int(p.rate * rng.uniform(8, 14))
        session = self.em.open(p, start * 1000, rng.choice(p.addresses), 2)
        times = self._times(start, rng.uniform(30, 45), count)
        for at_ms in times:
            self.em.request(p, session, at_ms, api="fetch" if not p.produces else "produce")
        self.em.close(p, session)
        self._label(
            "exfiltration", kinds.VOLUME_SPIKE, p.name, start, times[-1] / 1000, requests=count
        )

    def denied_spike(self, p: Principal) -> None:
        self._attack_ids += 1
        rng = self.rng
        start = self.slot(p, self._busy(p, 1)) + rng.randrange(3, 20) * 60
        other = rng.choice(
            [t for t in self.scenario.tenants if t.name != p.tenant] or list(self.scenario.tenants)
        )
        topics = rng.sample(other.topics, k=rng.choice((1, 2)))
        count = rng.randint(30, 120)
        times = self._times(start, rng.uniform(15, 35), count)
        self._session_requests(
            p,
            rng.choice(p.addresses),
            times,
            api="produce",
            topic=rng.choice(topics),
            decision="deny",
        )
        self._label(
            "misuse",
            kinds.DENIED_SPIKE,
            p.name,
            start,
            times[-1] / 1000,
            denied=count,
            topics=topics,
        )

    def probing(self, p: Principal) -> None:
        self._attack_ids += 1
        rng = self.rng
        start = self.slot(p, self._busy(p, 1)) + rng.randrange(3, 20) * 60
        others = [
            t for tenant in self.scenario.tenants if tenant.name != p.tenant for t in tenant.topics
        ]
        guessed = [f"{p.tenant}.{w}" for w in PROBED_WORDS]
        topics = rng.sample(others, k=min(len(others), rng.randint(8, 24))) + rng.sample(
            guessed, k=rng.randint(4, 8)
        )
        session = self.em.open(p, start * 1000, rng.choice(p.addresses), 1)
        times = self._times(start, rng.uniform(10, 30), len(topics) * 2)
        for i, at_ms in enumerate(times):
            api = rng.choice(("metadata", "fetch", "describe_configs"))
            self.em.request(p, session, at_ms, api=api, topic=topics[i // 2], decision="deny")
        self.em.close(p, session)
        end = times[-1] / 1000
        self._label("probing", kinds.PROBING, p.name, start, end, topics=len(topics))
        self._label("probing", kinds.DENIED_SPIKE, p.name, start, end, denied=len(times))

    def unusual_hour(self, p: Principal) -> None:
        self._attack_ids += 1
        rng = self.rng

        def quiet(hod: int) -> bool:
            return all(p.expected((hod + d) % 24) == 0 for d in (-2, -1, 0, 1, 2))

        start = self.slot(p, quiet) + rng.randrange(2, 15) * 60
        count = max(15, int(p.rate * rng.uniform(0.6, 1.2)))
        times = self._times(start, rng.uniform(25, 40), count)
        self._session_requests(p, rng.choice(p.addresses), times)
        self._label(
            "off_hours_use", kinds.UNUSUAL_HOUR, p.name, start, times[-1] / 1000, requests=count
        )

    def first_topic(self, p: Principal) -> None:
        self._attack_ids += 1
        rng = self.rng
        start = self.slot(p, self._busy(p, 1)) + rng.randrange(3, 30) * 60
        count = rng.randint(5, 20)
        times = self._times(start, rng.uniform(5, 25), count)
        api = "produce" if p.produces else "fetch"
        # A topic others (of another tenant) have used all along: a never-used topic
        # would be a new one, which is not lateral movement.
        owners = [q for q in self.scenario.principals if q.tenant != p.tenant] or [p]
        topic = rng.choice(rng.choice(owners).topics)
        self._session_requests(p, rng.choice(p.addresses), times, api=api, topic=topic)
        self._label(
            "lateral_access",
            kinds.FIRST_TOPIC,
            p.name,
            start,
            times[-1] / 1000,
            topic=topic,
        )

    def throttle_storm(self, p: Principal) -> None:
        """The tenant's quota runs dry: the principal's own requests come back throttled
        for most of an hour, and its client retries a little more than usual."""
        self._attack_ids += 1
        rng = self.rng
        start = self.slot(p, self._busy(p, 25)) + rng.randrange(2, 10) * 60
        minutes = rng.uniform(40, 60)
        lo, hi = _iso(start), _iso(start + minutes * 60)
        throttled = 0
        for record in self.em.records:
            if (
                record["principal"] == p.name
                and record["type"] == "request"
                and lo <= record["ts"] < hi
            ):
                record["throttle_ms"] = rng.randrange(800, 5000)
                throttled += 1
        retries = poisson(rng, 0.3 * p.expected((start // HOUR) % 24) * minutes / 60)
        times = self._times(start, minutes, max(retries, 12 - throttled))
        session = self.em.open(p, times[0], rng.choice(p.addresses), 2)
        for at_ms in times:
            self.em.request(p, session, at_ms, throttle_ms=rng.randrange(800, 5000))
        self.em.close(p, session)
        self._label(
            "quota_exhaustion",
            kinds.THROTTLE_STORM,
            p.name,
            start,
            max(times[-1], int((start + minutes * 60) * 1000)) / 1000,  # all its throttling
            throttled=throttled + len(times),
        )


def _iso(epoch_s: float) -> str:
    return rfc3339_ms(int(epoch_s * 1000))


def inject(
    em: Emitter, scenario: Scenario, per_kind: int, exclude: frozenset[str] = frozenset()
) -> list[Label]:
    """``per_kind`` attacks of every kind on distinct victims (none in ``exclude``, the
    principals of the benign traps); their labels."""
    from . import evasive

    injector = Injector(em, scenario)
    rng = em.rng
    pool = [p for p in scenario.principals if p.name not in exclude]
    rng.shuffle(pool)

    def victim(eligible: Callable[[Principal], bool]) -> Principal | None:
        for p in pool:
            if eligible(p):
                pool.remove(p)
                return p
        return None

    def night_capable(p: Principal) -> bool:
        return p.profile == "business"

    def busy(p: Principal) -> bool:
        return max(p.expected(h) for h in range(24)) >= 30

    def busy_hours(p: Principal) -> bool:  # six working hours in a row, at least
        return sum(1 for h in range(24) if p.expected(h) > 5) >= 8

    plan: list[tuple[Callable[[Principal], bool], Callable[[Principal], None]]] = [
        (night_capable, injector.unusual_hour),
        (busy, injector.throttle_storm),
        (lambda p: True, lambda p: injector.brute_force(p, distributed=False)),
        (lambda p: True, lambda p: injector.brute_force(p, distributed=True)),
        (lambda p: True, lambda p: injector.new_address(p, rare=rng.random() < 0.4)),
        (lambda p: True, injector.volume_spike),
        (lambda p: True, injector.denied_spike),
        (lambda p: True, injector.probing),
        (lambda p: True, injector.first_topic),
        (lambda p: True, lambda p: evasive.slow_guessing(injector, p)),
        (busy_hours, lambda p: evasive.sustained_exfiltration(injector, p)),
        (lambda p: True, lambda p: evasive.destructive_admin(injector, p)),
    ]
    for _ in range(per_kind):
        for eligible, attack in plan:
            p = victim(eligible)
            if p is not None:
                attack(p)
        injector.spraying()
        evasive.distributed_spraying(injector)
        # a small scenario may have no principal left outside the traps: any will do
        # as the model a newcomer copies
        spare = [p for p in scenario.principals if p.name not in exclude]
        model = rng.choice(spare or scenario.principals)
        evasive.new_principal_probing(injector, model)
    return injector.labels
