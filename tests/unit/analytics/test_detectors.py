"""Each detector on a hand-made log: one case just over its threshold, one just under.

Four principals work steadily for three days (P-service around the clock, the
B-business ones from 09:00 to 17:59 UTC); the last day is the detection window.
The cases are planted there, and the test asserts the exact set of findings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.analytics import kinds
from gateway.analytics.job import AnalyzeOptions, analyze
from gateway.analytics.records import connection_record, request_record
from gateway.analytics.spark import Progress

START = 1_793_318_400  # 2026-10-30T00:00:00Z
HOUR = 3600
DAY = 24 * HOUR
DETECT = START + 2 * DAY


class Log:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.conn = 0

    def request(
        self,
        at: float,
        principal: str,
        host: str,
        topic: str = "t1",
        decision: str = "allow",
        throttle_ms: int = 0,
    ) -> None:
        self.records.append(
            request_record(
                int(at * 1000),
                instance="gw-1",
                conn="c1",
                host=host,
                port=40000,
                principal=principal,
                tenant="acme",
                mechanism="PLAIN",
                api_key_id="ak_1",
                client_id="app",
                api="produce",
                correlation_id=1,
                topics=[topic],
                groups=[],
                decision=decision,
                bytes_in=1000,
                bytes_out=50,
                records=10,
                throttle_ms=throttle_ms,
                latency_ms=1.0,
            )
        )

    def login(self, at: float, principal: str, host: str, ok: bool) -> None:
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
                mechanism="PLAIN",
                outcome="success" if ok else "failure",
                reason=None if ok else "authentication failed",
            )
        )

    def steady(self, principal: str, host: str, hours: range) -> None:
        for hour in range(3 * 24):
            if hour % 24 not in hours:
                continue
            at = START + hour * HOUR
            self.login(at + 1, principal, host, ok=True)
            for i in range(18 + hour % 5):
                self.request(at + 60 + i * 150, principal, host)


def _plant(log: Log) -> None:
    day3 = DETECT
    # failed logins: against P1 from 12 addresses (burst) / P2 from 11 (not)
    for i in range(12):
        log.login(day3 + 3600 + i * 10, "User:P1", f"10.200.0.{i + 1}", ok=False)
    for i in range(11):
        log.login(day3 + 3600 + i * 10, "User:P2", f"10.200.1.{i + 1}", ok=False)
    # from one address: 12 failures over 4 names (burst) / 11 (not)
    for i in range(12):
        log.login(day3 + 7200 + i * 10, f"User:n{i % 4}", "10.201.0.1", ok=False)
    for i in range(11):
        log.login(day3 + 7200 + i * 10, f"User:m{i % 4}", "10.201.0.2", ok=False)
    # spraying: 8 names from one address / 7 names
    for i in range(8):
        log.login(day3 + 10_800 + i * 30, f"User:s{i}", "10.202.0.1", ok=False)
    for i in range(7):
        log.login(day3 + 10_800 + i * 30, f"User:r{i}", "10.202.0.2", ok=False)
    # a new network for P3 / a new address inside P3's own /24
    log.login(day3 + 14_400, "User:P3", "10.99.0.1", ok=True)
    for i in range(5):
        log.request(day3 + 14_460 + i, "User:P3", "10.99.0.1")
        log.request(day3 + 14_460 + i, "User:P3", "10.1.3.77")
    # volume: 200 requests in an hour (spike) / 45 (more, but under 3x the median)
    for i in range(200):
        log.request(day3 + 5 * HOUR + 60 + i * 15, "User:P1", "10.1.1.1")
    for i in range(25):
        log.request(day3 + 5 * HOUR + 70 + i * 100, "User:P2", "10.1.2.1")
    # denied: 12 in an hour (spike) / 9
    for i in range(12):
        log.request(day3 + 6 * HOUR + i * 60, "User:P4", "10.1.4.1", "t-x", "deny")
    for i in range(9):
        log.request(day3 + 6 * HOUR + i * 60, "User:P2", "10.1.2.1", "t-x", "deny")
    # probing: 8 distinct denied topics in an hour / 7
    for i in range(8):
        log.request(day3 + 8 * HOUR + i * 60, "User:P4", "10.1.4.1", f"other.{i}", "deny")
    for i in range(7):
        log.request(day3 + 8 * HOUR + i * 60, "User:P3", "10.1.3.1", f"other.{i}", "deny")
    # unusual hour: 10 requests at 03:00 (finding) / 9
    for i in range(10):
        log.request(day3 + 3 * HOUR + i * 60, "User:B1", "10.1.5.1")
    for i in range(9):
        log.request(day3 + 3 * HOUR + i * 60, "User:B2", "10.1.6.1")
    # first access to a topic P1 has used for two days (lateral) / to a topic nobody
    # used before (a new topic, not lateral movement)
    for day in range(2):
        log.request(START + day * 24 * HOUR + 9 * HOUR + 7, "User:P1", "10.1.1.1", "t-shared")
    for i in range(3):
        log.request(day3 + 12 * HOUR + i, "User:P2", "10.1.2.1", "t-shared")
        log.request(day3 + 12 * HOUR + i, "User:P2", "10.1.2.1", "t-new")
    # throttling: 10 responses, 10 s in all (storm) / 9
    for i in range(10):
        log.request(day3 + 14 * HOUR + i * 50, "User:P3", "10.1.3.1", throttle_ms=1000)
    for i in range(9):
        log.request(day3 + 14 * HOUR + i * 50, "User:P4", "10.1.4.1", throttle_ms=1000)


EXPECTED = {
    (kinds.AUTH_BURST_PRINCIPAL, "User:P1"),
    (kinds.AUTH_BURST_ADDRESS, "10.201.0.1"),
    (kinds.SPRAYING, "10.202.0.1"),
    (kinds.NEW_ADDRESS, "User:P3"),
    (kinds.VOLUME_SPIKE, "User:P1"),
    (kinds.DENIED_SPIKE, "User:P4"),
    (kinds.PROBING, "User:P4"),
    (kinds.UNUSUAL_HOUR, "User:B1"),
    (kinds.FIRST_TOPIC, "User:P2"),
    (kinds.THROTTLE_STORM, "User:P3"),
}


@pytest.fixture(scope="module")
def findings(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    log = Log()
    for n in (1, 2, 3, 4):
        log.steady(f"User:P{n}", f"10.1.{n}.1", range(24))
    log.steady("User:B1", "10.1.5.1", range(9, 18))
    log.steady("User:B2", "10.1.6.1", range(9, 18))
    _plant(log)
    log.records.sort(key=lambda r: r["ts"])
    directory = tmp_path_factory.mktemp("planted")
    lines = [json.dumps(r) for r in log.records] + ["not json", '{"v": 1, "type": "request"}']
    (directory / "access.jsonl").write_text("\n".join(lines) + "\n")
    options = AnalyzeOptions(logs=(str(directory),), out=directory / "out")
    result = analyze(spark, options, Progress("test", 9, quiet=True))
    assert result.skipped == 2
    assert result.detect_from == DETECT
    yield result.findings


def test_each_detector_fires_over_its_threshold_and_not_under(findings: list[Any]) -> None:
    assert {(f.detector, f.entity) for f in findings} == EXPECTED


def test_findings_carry_their_evidence(findings: list[Any]) -> None:
    by = {(f.detector, f.entity): f for f in findings}
    burst = by[(kinds.AUTH_BURST_PRINCIPAL, "User:P1")]
    assert burst.evidence["failures"] == 12 and burst.evidence["addresses"] == 12
    assert burst.start == DETECT + 3600 and burst.end == DETECT + 3600 + 110
    spike = by[(kinds.VOLUME_SPIKE, "User:P1")]
    assert spike.evidence["requests"] >= 200 and spike.evidence["robust_z_requests"] >= 8
    assert spike.start == DETECT + 5 * HOUR and spike.end == DETECT + 6 * HOUR
    new = by[(kinds.NEW_ADDRESS, "User:P3")]
    assert new.evidence["address"] == "10.99.0.1" and new.evidence["new"] is True
    assert new.severity == "high"
    assert by[(kinds.PROBING, "User:P4")].evidence["distinct_denied_topics"] == 8
    lateral = by[(kinds.FIRST_TOPIC, "User:P2")]
    assert lateral.evidence["topic"] == "t-shared" and lateral.evidence["topic_users_before"] == 1
    assert by[(kinds.UNUSUAL_HOUR, "User:B1")].evidence["hour_of_day_utc"] == 3
    storm = by[(kinds.THROTTLE_STORM, "User:P3")]
    assert storm.evidence == {
        "throttled": 10,
        "throttle_ms_total": 10_000,
        "throttle_ms_max": 1000,
        "minutes": 7.5,
    }
    assert all(f.summary and f.severity in ("low", "medium", "high", "critical") for f in findings)
