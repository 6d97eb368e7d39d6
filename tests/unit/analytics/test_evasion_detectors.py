"""The evasion-resistant detectors and the benign traps, on small hand-made logs (no Spark).

Each test builds three days of steady traffic for a few tenants, plants one thing in
the last day (the detection window) and runs every detector through the pure-Python
rollup (:mod:`gateway.analytics.detect.local`), which makes the rows the Spark job makes.
"""

from __future__ import annotations

from typing import Any

from gateway.accesslog.records import auth_failure_record
from gateway.analytics import kinds
from gateway.analytics.detect.local import detect_records, rollup
from gateway.analytics.findings import Finding
from gateway.analytics.records import connection_record, request_record
from gateway.identity import ClientIdentity

HOUR = 3600
START = 1_793_318_400  # 2026-10-30T00:00:00Z
DETECT = START + 48 * HOUR
TENANTS = {"a": 5, "b": 5}


class Log:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.conn = 0

    def request(
        self,
        at: float,
        principal: str,
        host: str,
        topic: str,
        *,
        api: str = "fetch",
        decision: str = "allow",
        tenant: str | None = None,
        size: int = 2000,
        groups: tuple[str, ...] = (),
    ) -> None:
        self.records.append(
            request_record(
                int(at * 1000),
                instance="gw-1",
                conn="c1",
                host=host,
                port=40000,
                principal=principal,
                tenant=tenant or principal.split(":")[1].split("-")[0],
                mechanism="SCRAM-SHA-512",
                api_key_id=None,
                client_id="app",
                api=api,
                correlation_id=1,
                topics=[topic] if topic else [],
                groups=list(groups),
                decision=decision,
                bytes_in=100,
                bytes_out=size,
                records=10,
                throttle_ms=0,
                latency_ms=1.0,
            )
        )

    def login(self, at: float, principal: str, host: str, ok: bool = True) -> None:
        self.conn += 1
        self.records.append(
            connection_record(
                int(at * 1000),
                "auth",
                instance="gw-1",
                conn=f"a{self.conn}",
                host=host,
                port=40001,
                principal=principal,
                tenant=None,
                mechanism="SCRAM-SHA-512",
                outcome="success" if ok else "failure",
                reason=None if ok else "authentication failed",
            )
        )

    def steady(
        self, principal: str, host: str, topic: str, hours: range, rate: int = 20, scale: float = 1
    ) -> None:
        """``rate`` requests an hour over ``hours`` (indexes from START), ``scale`` times
        that from the detection window on where asked."""
        for hour in hours:
            at = START + hour * HOUR
            self.login(at + 1, principal, host)
            n = rate + hour % 3
            for i in range(n):
                self.request(at + 30 + i * (3000 // n), principal, host, topic)


def world(log: Log, until: int = 72) -> None:
    """Tenants a and b: five services each, each on its own host and topic."""
    for tenant, count in TENANTS.items():
        for i in range(count):
            log.steady(
                f"User:{tenant}-s{i}", f"10.{ord(tenant)}.{i}.5", f"{tenant}.t{i}", range(until)
            )


def found(log: Log) -> list[Finding]:
    return detect_records(log.records)


def of(findings: list[Finding], detector: str) -> list[Finding]:
    return [f for f in findings if f.detector == detector]


def test_a_quiet_world_raises_nothing() -> None:
    log = Log()
    world(log)
    assert found(log) == []


# -- low and slow guessing ---------------------------------------------------------


def test_slow_guessing_over_many_hours_is_found_with_its_spread() -> None:
    log = Log()
    world(log)
    for i in range(12):  # one every 70 minutes from two addresses: never a burst
        log.login(DETECT + i * 4200, "User:a-s1", f"10.250.3.{i % 2 + 7}", ok=False)
    findings = found(log)
    assert of(findings, kinds.AUTH_BURST_PRINCIPAL) == []
    (slow,) = of(findings, kinds.SLOW_GUESSING)
    assert slow.entity == "User:a-s1" and slow.evidence["failures"] == 12
    assert slow.evidence["min_gap_s"] >= 4000 and slow.evidence["addresses"] == 2
    assert slow.evidence["networks"] == ["10.250.3"]


def test_a_stale_secret_on_the_principals_own_host_is_not_guessing() -> None:
    """Key rotation: a forgotten instance keeps failing from the principal's network."""
    log = Log()
    world(log)
    for i in range(12):
        log.login(DETECT + i * 4200, "User:a-s1", "10.97.1.5", ok=False)
    assert of(found(log), kinds.SLOW_GUESSING) == []


def test_a_failed_login_counts_against_the_claimed_name_of_the_real_gateways_record() -> None:
    """The gateway's failed-auth record keeps User:ANONYMOUS and names the claim."""
    log = Log()
    world(log)
    for i in range(10):
        identity = ClientIdentity("public", f"203.0.113.{i % 3 + 1}", 40000 + i)
        for mechanism, claimed in (("SCRAM-SHA-512", "a-s2"), ("PLAIN", "ak_7f3e")):
            record = auth_failure_record(
                "gw-1",
                f"f{i}",
                identity,
                mechanism=mechanism,
                claimed=claimed,
                reason="wrong_secret",
                now=DETECT + i * 3000,
            )
            assert record["principal"] == "User:ANONYMOUS"
            log.records.append(record)
    singles = [s for s in rollup(log.records).singles if s.kind == "auth_failure"]
    assert {s.principal for s in singles} == {"User:a-s2", "ak_7f3e"}
    slow = {f.entity for f in of(found(log), kinds.SLOW_GUESSING)}
    assert slow == {"User:a-s2", "ak_7f3e"}


# -- distributed spraying ------------------------------------------------------------


def _spray(log: Log, networks: int, familiar: bool = False) -> None:
    names = [f"User:{t}-s{i}" for t in TENANTS for i in range(5)] + ["User:admin", "User:root"]
    for n in range(30):
        host = f"10.{230 + n % networks}.9.{n + 10}"
        if familiar:
            log.login(START + 3600, "User:b-s4", host)
        for k in range(1 + n % 2):
            log.login(DETECT + 7200 + n * 90 + k * 30, names[(n * 5 + k) % len(names)], host, False)


def test_distributed_spraying_from_many_quiet_addresses_is_one_finding() -> None:
    log = Log()
    world(log)
    _spray(log, networks=5)
    findings = found(log)
    assert of(findings, kinds.SPRAYING) == of(findings, kinds.AUTH_BURST_ADDRESS) == []
    (spray,) = of(findings, kinds.DISTRIBUTED_SPRAYING)
    assert spray.evidence["addresses"] == 30 and spray.evidence["networks"] == 5
    assert spray.evidence["principals"] >= 12 and spray.evidence["max_failures_per_address"] == 2
    assert spray.client_host is not None and spray.client_host.startswith("10.23")


def test_spraying_from_familiar_addresses_or_one_network_is_not_distributed_spraying() -> None:
    log = Log()
    world(log)
    _spray(log, networks=5, familiar=True)  # addresses that logged in before: a NAT
    assert of(found(log), kinds.DISTRIBUTED_SPRAYING) == []
    log = Log()
    world(log)
    _spray(log, networks=1)
    assert of(found(log), kinds.DISTRIBUTED_SPRAYING) == []


def _concurrent_sprays(log: Log, campaigns: int, stagger_s: int) -> None:
    """``campaigns`` sprays at (nearly) the same time, each from its own networks against
    its own principals: what a big gateway with many tenants sees, and what the bulk
    simulator writes when it replicates a scenario (every replica attacks at once)."""
    for c in range(campaigns):
        names = [f"User:x{c}-v{i}" for i in range(10)]
        for n in range(30):
            host = f"10.{200 + c % 50}.{c // 50 * 5 + n % 5}.{n + 10}"
            for k in range(1 + n % 2):
                at = DETECT + 7200 + c * stagger_s + n * 90 + k * 30
                log.login(at, names[(n * 3 + k) % len(names)], host, False)


def test_concurrent_sprays_against_different_principals_are_one_finding_each() -> None:
    """Regression (issue 17, 10 M records: recall 0.0118): sprays that overlap in time
    were chained into one campaign and, their networks being active over the same span,
    reported as one finding. Campaigns are told apart by whom they try."""
    for stagger_s in (0, 60):
        log = Log()
        world(log)
        _concurrent_sprays(log, campaigns=12, stagger_s=stagger_s)
        sprays = of(found(log), kinds.DISTRIBUTED_SPRAYING)
        assert len(sprays) == 12, [s.summary for s in sprays]
        for spray in sprays:
            victims = {p.split("-")[0] for p in spray.evidence["sample_principals"]}  # type: ignore[union-attr]
            assert len(victims) == 1 and spray.evidence["addresses"] == 30
            assert spray.evidence["networks"] == 5


def test_one_off_failures_of_many_tenants_at_once_are_no_spray() -> None:
    """Regression (issue 17, 10 M records: 5 false sprays): one failed login each, from
    unfamiliar addresses of many networks, against as many different principals, in the
    same minutes. Login noise grows with the tenants; nothing ties these together."""
    log = Log()
    world(log)
    for n in range(40):
        log.login(DETECT + 3600 + n * 7, f"User:t{n}-app", f"10.{n}.14.{n + 10}", False)
        log.login(DETECT + 3605 + n * 7, f"User:t{n}-app", f"10.{n}.14.{n + 10}", False)
    assert of(found(log), kinds.DISTRIBUTED_SPRAYING) == []


# -- sustained volume and the sale day -------------------------------------------------


def test_sustained_exfiltration_is_found_though_no_hour_spikes() -> None:
    log = Log()
    world(log, until=48)
    for tenant, count in TENANTS.items():
        for i in range(count):
            principal, host = f"User:{tenant}-s{i}", f"10.{ord(tenant)}.{i}.5"
            rate = 55 if principal == "User:a-s3" else 20  # 2.6 times, all day
            log.steady(principal, host, f"{tenant}.t{i}", range(48, 72), rate=rate)
    findings = found(log)
    assert of(findings, kinds.VOLUME_SPIKE) == []
    (steady,) = of(findings, kinds.SUSTAINED_VOLUME)
    assert steady.entity == "User:a-s3" and steady.evidence["hours"] >= 20
    assert 2.5 <= steady.evidence["ratio_requests"] <= 2.8
    assert steady.evidence["max_hour_ratio"] < 3 and steady.evidence["tenant_factor_max"] == 1


def test_a_whole_tenant_rising_together_is_no_finding_per_principal() -> None:
    log = Log()
    world(log, until=48)
    for tenant, count in TENANTS.items():
        for i in range(count):
            rate = 80 if tenant == "a" else 20  # a sale day: all of tenant a, four times
            log.steady(
                f"User:{tenant}-s{i}",
                f"10.{ord(tenant)}.{i}.5",
                f"{tenant}.t{i}",
                range(48, 72),
                rate=rate,
            )
    assert found(log) == []


# -- a principal with no history ------------------------------------------------------


def test_a_new_principal_probing_other_tenants_is_judged_against_its_peers() -> None:
    log = Log()
    world(log)
    at = DETECT + 5 * HOUR
    log.login(at, "User:a-tmp1", "10.251.0.9")
    log.request(at + 5, "User:a-tmp1", "10.251.0.9", "a.t0")
    for i, topic in enumerate(("b.t0", "b.t1", "b.t2", "a.secrets")):
        log.request(at + 60 + i * 30, "User:a-tmp1", "10.251.0.9", topic, decision="deny")
    findings = found(log)
    assert of(findings, kinds.PROBING) == []  # four topics: under the per-hour threshold
    (probe,) = of(findings, kinds.NEW_PRINCIPAL_PROBING)
    assert probe.entity == "User:a-tmp1" and probe.evidence["outside_topics"] == 4
    assert probe.evidence["peers"] == 5 and probe.evidence["peer_max_denied_topics"] == 0


def test_a_rotated_key_doing_what_the_old_one_did_raises_nothing() -> None:
    log = Log()
    world(log, until=60)
    log.steady("User:a-s2-v2", "10.97.2.5", "a.t2", range(60, 72))  # took over at hour 60
    for i in range(5):
        log.steady(f"User:a-s{i}", f"10.97.{i}.5", f"a.t{i}", range(60, 72)) if i != 2 else None
    for i in range(5):
        log.steady(f"User:b-s{i}", f"10.98.{i}.5", f"b.t{i}", range(60, 72))
    assert found(log) == []


# -- sustained volume judged a window of one hour (kgw analyze --follow) --------------


def _raised_world(hours: int) -> Log:
    """Three days, then a-s1 at about 2.8 times its volume for its last ``hours``
    (under the spike ratio every hour, so only a run can show it)."""
    log = Log()
    for tenant, count in TENANTS.items():
        for i in range(count):
            principal, host = f"User:{tenant}-s{i}", f"10.{ord(tenant)}.{i}.5"
            if (tenant, i) == ("a", 1):
                log.steady(principal, host, f"{tenant}.t{i}", range(72 - hours))
                log.steady(principal, host, f"{tenant}.t{i}", range(72 - hours, 72), rate=57)
            else:
                log.steady(principal, host, f"{tenant}.t{i}", range(72))
    return log


def test_a_sustained_run_is_found_with_a_one_hour_window_once() -> None:
    """As --follow judges: every 20 minutes, the last hour against what came before;
    a run of 12 hours is seen whole (its lookback), and reported with one start."""
    from gateway.analytics.records import parse_rfc3339

    log = _raised_world(12)
    log.records.sort(key=lambda r: r["ts"])
    seen: dict[tuple[str, str, float], Finding] = {}
    for hour in range(60, 72):
        for minute in (10, 30, 50):
            cut = START + hour * HOUR + minute * 60
            part = [r for r in log.records if parse_rfc3339(r["ts"]) < cut]
            for finding in of(detect_records(part, detect_hours=1), kinds.SUSTAINED_VOLUME):
                seen.setdefault((finding.detector, finding.entity, finding.start), finding)
    (run,) = seen.values()
    assert run.entity == "User:a-s1" and run.start == START + 60 * HOUR


def test_no_run_in_a_quiet_world_with_a_one_hour_window() -> None:
    log = Log()
    world(log)
    assert of(detect_records(log.records, detect_hours=1), kinds.SUSTAINED_VOLUME) == []


# -- destructive administration -----------------------------------------------------


def _deletions(log: Log, principal: str, host: str, at: float) -> None:
    log.request(at, principal, host, "a.t1", api="delete_topics")
    log.request(at + 60, principal, host, "a.t2", api="delete_records")
    log.request(at + 90, principal, host, "", api="delete_groups", groups=("a.g1",))


def test_deletions_by_a_principal_that_never_administered_are_found() -> None:
    log = Log()
    world(log)
    _deletions(log, "User:a-s4", "10.97.4.5", DETECT + 3 * HOUR)
    (admin,) = of(found(log), kinds.DESTRUCTIVE_ADMIN)
    assert admin.entity == "User:a-s4" and admin.evidence["requests"] == 3
    assert admin.evidence["apis"] == ["delete_groups", "delete_records", "delete_topics"]
    assert admin.evidence["sample_targets"] == ["a.g1", "a.t1", "a.t2"]


def test_routine_administration_and_its_rotated_key_raise_nothing() -> None:
    log = Log()
    world(log, until=60)
    for day in range(2):  # the operations principal cleans up every day
        _deletions(log, "User:a-s4", "10.97.4.5", START + day * 24 * HOUR + 2 * HOUR)
    _deletions(log, "User:a-s4", "10.97.4.5", DETECT + 2 * HOUR)
    log.steady("User:a-s4-v2", "10.97.4.5", "a.t4", range(60, 72))  # its key rotated
    _deletions(log, "User:a-s4-v2", "10.97.4.5", DETECT + 20 * HOUR)
    for t, count in TENANTS.items():
        for i in range(count):
            if (t, i) != ("a", 4):
                log.steady(f"User:{t}-s{i}", f"10.{ord(t)}.{i}.5", f"{t}.t{i}", range(60, 72))
    assert of(found(log), kinds.DESTRUCTIVE_ADMIN) == []


def test_a_refused_admin_request_earlier_is_no_history() -> None:
    """One cheap refused request days before must not make the principal an admin."""
    log = Log()
    world(log)
    log.request(START + 2 * HOUR, "User:a-s4", "10.97.4.5", "a.t9", api="create_topics",
                decision="deny")  # fmt: skip
    _deletions(log, "User:a-s4", "10.97.4.5", DETECT + 3 * HOUR)
    (admin,) = of(found(log), kinds.DESTRUCTIVE_ADMIN)
    assert admin.entity == "User:a-s4" and admin.severity == "critical"


def test_deletions_spaced_out_over_the_window_are_found() -> None:
    """One deletion every 61 minutes never forms an episode; the window still shows them."""
    log = Log()
    world(log)
    for i in range(6):
        at = DETECT + HOUR + i * 61 * 60
        log.request(at, "User:a-s4", "10.97.4.5", f"a.t{i}", api="delete_topics")
    (admin,) = of(found(log), kinds.DESTRUCTIVE_ADMIN)
    assert admin.entity == "User:a-s4" and admin.evidence["requests"] == 6


def test_a_single_spaced_deletion_is_still_nothing() -> None:
    log = Log()
    world(log)
    log.request(DETECT + HOUR, "User:a-s4", "10.97.4.5", "a.t1", api="delete_topics")
    log.request(DETECT + 5 * HOUR, "User:a-s4", "10.97.4.5", "a.t1", api="delete_records")
    assert of(found(log), kinds.DESTRUCTIVE_ADMIN) == []


# -- first access to a topic, and an address move ---------------------------------


def test_first_use_of_a_new_topic_is_not_lateral_but_of_a_long_used_one_is() -> None:
    log = Log()
    world(log)
    for i in range(5):  # tenant a launches a.launch: every app starts using it
        log.request(DETECT + 4 * HOUR + i * 600, f"User:a-s{i}", f"10.97.{i}.5", "a.launch")
    log.request(DETECT + 6 * HOUR, "User:a-s0", "10.97.0.5", "b.t3")  # b-s3's for days
    (lateral,) = of(found(log), kinds.FIRST_TOPIC)
    assert lateral.entity == "User:a-s0" and lateral.evidence["topic"] == "b.t3"
    assert lateral.evidence["other_tenant"] is True and lateral.severity == "high"
    assert lateral.evidence["topic_tenants"] == ["b"]


def test_an_app_moving_to_a_new_address_in_its_network_raises_nothing() -> None:
    log = Log()
    world(log, until=60)
    for t, count in TENANTS.items():
        for i in range(count):
            host = "10.97.1.77" if (t, i) == ("a", 1) else f"10.{ord(t)}.{i}.5"
            log.steady(f"User:{t}-s{i}", host, f"{t}.t{i}", range(60, 72))
    assert found(log) == []


def test_a_tenant_throttled_together_is_no_finding_per_principal() -> None:
    from gateway.analytics.detect.context import Thresholds
    from gateway.analytics.detect.rows import Single
    from gateway.analytics.detect.run import auth_stage

    def storm(principal: str, tenant: str, at: int) -> list[Single]:
        return [Single(at + i * 30, "throttled", principal, tenant, None, 2000) for i in range(12)]

    together = (
        storm("User:a-s0", "a", 0) + storm("User:a-s1", "a", 60) + storm("User:a-s2", "a", 90)
    )
    alone = storm("User:b-s0", "b", 0)
    quiet = auth_stage(together + alone, Thresholds())
    assert [(f.entity, f.principal) for f in quiet] == [("User:b-s0", "User:b-s0")]
    findings = auth_stage(together + alone, Thresholds(tenant_events=True))
    assert sorted((f.entity, f.principal) for f in findings) == [
        ("User:b-s0", "User:b-s0"),
        ("a", None),
    ]
    tenant = next(f for f in findings if f.entity == "a")
    assert tenant.evidence["tenant_level"] is True and tenant.evidence["principals"] == 3
    assert tenant.evidence["throttled"] == 36 and tenant.tenant == "a"
