"""Ordinary traffic: what each simulated principal does when nothing is wrong.

Requests arrive as a Poisson process at the principal's hourly pace; they ride on
connections that last one to four hours (open, TLS, SASL, close records around
them), each from one of the principal's addresses. The noise a real log has is
here too: mistyped or rotated credentials (a few failed logins, a tenant's
rotation from its NAT address), clients that keep asking for a topic they may not
use, a little throttling of busy principals.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any, TypedDict

from .records import connection_record, request_record
from .scenario import HOUR, Principal, Scenario

INSTANCES = ("gw-1", "gw-2")


def poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 40:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, product = math.exp(-lam), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


class Endpoint(TypedDict):
    instance: str
    conn: str
    host: str
    port: int


@dataclass(slots=True)
class Session:
    conn: str
    instance: str
    host: str
    port: int
    until_ms: int
    last_ms: int
    correlation: int = 0


class Emitter:
    """Collects records and hands out connection ids, ports and sessions."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.records: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def open(self, p: Principal, at_ms: int, host: str, hours: float) -> Session:
        rng = self.rng
        instance = rng.choice(INSTANCES)
        session = Session(
            f"c{next(self._ids)}",
            instance,
            host,
            rng.randrange(32768, 61000),
            at_ms + int(hours * HOUR * 1000),
            at_ms,
        )
        common = Endpoint(instance=instance, conn=session.conn, host=host, port=session.port)
        self.records.append(connection_record(at_ms - 40, "open", **common))
        self.records.append(connection_record(at_ms - 30, "tls", outcome="success", **common))
        self.records.append(
            connection_record(
                at_ms - 10,
                "auth",
                principal=p.name,
                tenant=p.tenant,
                mechanism=p.mechanism,
                api_key_id=p.api_key_id,
                outcome="success",
                **common,
            )
        )
        return session

    def close(self, p: Principal, session: Session, reason: str = "client closed") -> None:
        self.records.append(
            connection_record(
                session.last_ms + self.rng.randrange(50, 5000),
                "close",
                instance=session.instance,
                conn=session.conn,
                host=session.host,
                port=session.port,
                principal=p.name,
                tenant=p.tenant,
                mechanism=p.mechanism,
                api_key_id=p.api_key_id,
                reason=reason,
            )
        )

    def failed_login(self, name: str, tenant: str | None, host: str, at_ms: int, mech: str) -> None:
        common = Endpoint(
            instance=self.rng.choice(INSTANCES),
            conn=f"c{next(self._ids)}",
            host=host,
            port=self.rng.randrange(32768, 61000),
        )
        self.records.append(connection_record(at_ms, "open", **common))
        self.records.append(connection_record(at_ms + 8, "tls", outcome="success", **common))
        self.records.append(
            connection_record(
                at_ms + 20,
                "auth",
                principal=name,
                tenant=tenant,
                mechanism=mech,
                outcome="failure",
                reason="authentication failed",
                **common,
            )
        )
        self.records.append(
            connection_record(at_ms + 25, "close", reason="authentication failed", **common)
        )

    def request(
        self,
        p: Principal,
        session: Session,
        at_ms: int,
        *,
        api: str | None = None,
        topic: str | None = None,
        decision: str = "allow",
        throttle_ms: int | None = None,
        names: tuple[list[str], list[str]] | None = None,
        scale: float = 1.0,
    ) -> None:
        """One request; ``names`` (topics, groups) overrides the ones the API implies,
        ``scale`` multiplies the bytes it moves."""
        rng = self.rng
        if api is None:
            api = _pick_api(rng, p.produces)
        topic = topic or rng.choice(p.topics)
        group = f"{p.tenant}.{p.client_id}"
        topics = [] if api in ("heartbeat", "find_coordinator") else [topic]
        groups = [group] if api in ("offset_commit", "heartbeat", "find_coordinator") else []
        if names is not None:
            topics, groups = names
        size_in, size_out, count = _sizes(rng, api, decision)
        size_in, size_out = int(size_in * scale), int(size_out * scale)
        if throttle_ms is None:
            throttle_ms = rng.randrange(20, 400) if rng.random() < p.throttle_share else 0
        session.correlation += 1
        session.last_ms = max(session.last_ms, at_ms)
        self.records.append(
            request_record(
                at_ms,
                instance=session.instance,
                conn=session.conn,
                host=session.host,
                port=session.port,
                principal=p.name,
                tenant=p.tenant,
                mechanism=p.mechanism,
                api_key_id=p.api_key_id,
                client_id=p.client_id,
                api=api,
                correlation_id=session.correlation,
                topics=topics,
                groups=groups,
                decision=decision,
                bytes_in=size_in,
                bytes_out=size_out,
                records=count,
                throttle_ms=throttle_ms,
                latency_ms=round(rng.lognormvariate(0.8, 0.5), 2),
            )
        )


def _pick_api(rng: random.Random, produces: bool) -> str:
    if produces:
        return rng.choices(("produce", "metadata", "api_versions"), weights=(80, 15, 5))[0]
    return rng.choices(
        ("fetch", "offset_commit", "heartbeat", "metadata", "find_coordinator"),
        weights=(60, 15, 15, 8, 2),
    )[0]


def _sizes(rng: random.Random, api: str, decision: str) -> tuple[int, int, int | None]:
    if decision == "deny":
        return rng.randrange(60, 400), rng.randrange(40, 90), None
    if api == "produce":
        count = rng.randrange(1, 400)
        return int(count * rng.lognormvariate(5.0, 0.4)) + 90, rng.randrange(50, 90), count
    if api == "fetch":
        count = rng.randrange(0, 500)
        return rng.randrange(90, 140), int(count * rng.lognormvariate(5.0, 0.4)) + 60, count
    return rng.randrange(40, 200), rng.randrange(60, 900), None


def principal_traffic(em: Emitter, scenario: Scenario, p: Principal) -> None:
    """Every ordinary request, connection and stray failure of one principal."""
    rng = em.rng
    session: Session | None = None
    for hour in range(scenario.hours):
        hour_start = scenario.start + hour * HOUR
        hod = (hour_start // HOUR) % 24
        allowed = poisson(rng, p.expected(hod))
        denied = poisson(rng, p.chronic_denials) if p.expected(hod) > 2 else 0
        moments = sorted(
            [(rng.randrange(HOUR * 1000), "allow") for _ in range(allowed)]
            + [(rng.randrange(HOUR * 1000), "deny") for _ in range(denied)]
        )
        for offset, decision in moments:
            at_ms = hour_start * 1000 + offset
            if session is None or at_ms >= session.until_ms:
                if session is not None:
                    em.close(p, session)
                session = em.open(p, at_ms, rng.choice(p.addresses), rng.uniform(1, 4))
            if decision == "deny":
                api = rng.choice(("metadata", "produce" if p.produces else "fetch"))
                em.request(p, session, at_ms, api=api, topic=p.denied_topic, decision="deny")
            else:
                em.request(p, session, at_ms)
        if session is not None and session.last_ms < hour_start * 1000 and allowed == 0:
            em.close(p, session, "idle")
            session = None
        if allowed and rng.random() < 0.15 / len(p.usual_hours()):  # ~once a week
            at_ms = hour_start * 1000 + rng.randrange(HOUR * 1000)
            for i in range(rng.choice((1, 1, 2))):
                em.failed_login(
                    p.name, p.tenant, rng.choice(p.addresses), at_ms + i * 4000, p.mechanism
                )
    if session is not None:
        em.close(p, session)


def rotation_failures(em: Emitter, scenario: Scenario) -> None:
    """Each tenant rotates its credentials once: a few of its principals fail from its NAT."""
    rng = em.rng
    for tenant in scenario.tenants:
        if rng.random() > 0.7:
            continue
        members = [p for p in scenario.principals if p.tenant == tenant.name]
        chosen = rng.sample(members, k=min(len(members), rng.randint(3, 5)))
        at = (scenario.start + rng.randrange(scenario.hours - 1) * HOUR) * 1000
        at += rng.randrange(HOUR * 1000 - 600_000)
        for p in chosen:
            for _ in range(rng.choice((1, 2))):
                em.failed_login(
                    p.name, p.tenant, tenant.nat, at + rng.randrange(600_000), p.mechanism
                )
