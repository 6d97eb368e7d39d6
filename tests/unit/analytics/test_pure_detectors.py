"""The detectors' rules on hand-made rows, without Spark."""

from __future__ import annotations

import pytest

from gateway.analytics import kinds
from gateway.analytics.detect.access import new_addresses
from gateway.analytics.detect.auth import auth_bursts, episodes, throttle_storms
from gateway.analytics.detect.baseline import hourly_findings, periods, probing_findings
from gateway.analytics.detect.context import Thresholds
from gateway.analytics.detect.rows import HostRow, HourRow, Single, network, robust

T = Thresholds()
DAY0 = 1_793_318_400
DETECT = DAY0 + 2 * 86_400


def hours(principal: str, counts: dict[int, int], denied: int = 0) -> list[HourRow]:
    """72 hours; ``counts`` maps hour index to allowed requests (others: 20)."""
    return [
        HourRow(
            principal,
            DAY0 + h * 3600,
            "t",
            counts.get(h, 20),
            counts.get(h, 20) * 1000,
            denied,
            counts.get(h, 20) + denied,
        )
        for h in range(72)
    ]


def test_robust_statistics() -> None:
    stats = robust([10, 12, 11, 13, 200])
    assert (stats.median, stats.mad, stats.max, stats.n) == (12, 1, 200, 5)
    assert round(stats.z(20), 2) == round(8 / max(1.4826, 1.2, 1.0), 2)
    flat = robust([5, 5, 5])
    assert flat.z(6) == 1.0  # the scale is floored at 1, never zero
    assert network("10.1.2.3") == "10.1.2" and network("fd00:1a:4:12::7") == "fd00:1a:4:12::/64"


def test_a_nightly_job_busy_every_night_is_not_a_spike() -> None:
    nightly = {h: 400 for h in range(72) if h % 24 in (1, 2)}
    quiet = {h: 2 for h in range(72) if h % 24 not in (1, 2)}
    rows = hours("User:batch", {**quiet, **nightly})
    assert hourly_findings(periods(rows, DETECT, T), T) == []
    rows[48 + 10] = HourRow("User:batch", DAY0 + 58 * 3600, "t", 700, 700_000, 0, 700)
    found = hourly_findings(periods(rows, DETECT, T), T)  # 10:00 is also an hour it never works
    assert {(f.detector, f.start) for f in found} == {
        (kinds.VOLUME_SPIKE, DAY0 + 58 * 3600),
        (kinds.UNUSUAL_HOUR, DAY0 + 58 * 3600),
    }


def test_adjacent_spike_hours_become_one_finding() -> None:
    rows = hours("User:a", {50: 300, 51: 320})
    (finding,) = hourly_findings(periods(rows, DETECT, T), T)
    assert (finding.start, finding.end) == (DAY0 + 50 * 3600, DAY0 + 52 * 3600)
    assert finding.evidence["buckets"] == 2


def test_principals_without_a_day_of_history_are_not_judged() -> None:
    rows = [r for r in hours("User:new", {60: 500}) if r.hour >= DETECT - 3600]
    assert hourly_findings(periods(rows, DETECT, T), T) == []


def test_probing_is_judged_against_the_principal_s_own_most_denied_hour() -> None:
    rows = hours("User:a", {}, denied=1) + hours("User:b", {}, denied=1)
    topics = [f"t{i}" for i in range(12)]
    denied = {
        ("User:a", DAY0 + 10 * 3600): tuple(topics[:7]),  # a's baseline: 7 in an hour
        ("User:a", DAY0 + 50 * 3600): tuple(topics[:10]),  # not 1.5 times its most
        ("User:b", DAY0 + 50 * 3600): tuple(topics[:8]),  # b: 8 where it never had any
        ("User:b", DAY0 + 51 * 3600): tuple(topics[:9]),
        ("User:b", DAY0 + 60 * 3600): tuple(topics[:7]),  # under the minimum of 8
    }
    (finding,) = probing_findings(periods(rows, DETECT, T), denied, DETECT, T)
    assert (finding.detector, finding.entity) == (kinds.PROBING, "User:b")
    assert (finding.start, finding.end) == (DAY0 + 50 * 3600, DAY0 + 52 * 3600)
    assert finding.evidence["distinct_denied_topics"] == 9
    assert finding.evidence["sample_topics"] == sorted(topics[:9])
    assert finding.evidence["baseline_max_distinct"] == 0
    denied[("User:a", DAY0 + 50 * 3600)] = tuple(topics[:11])  # over 1.5 x 7
    found = probing_findings(periods(rows, DETECT, T), denied, DETECT, T)
    assert {f.entity for f in found} == {"User:a", "User:b"}


def test_bursts_are_cut_at_gaps() -> None:
    rows = [Single(t, "auth_failure", "User:a", None, "10.0.0.1") for t in (0, 100, 700, 750)]
    assert [len(b) for _, b in episodes(rows, lambda s: s.principal, 300)] == [2, 2]
    burst = [Single(i * 20, "auth_failure", "User:a", None, f"10.9.0.{i}") for i in range(12)]
    assert [f.detector for f in auth_bursts(burst, T)] == [kinds.AUTH_BURST_PRINCIPAL]
    assert auth_bursts(burst[:11], T) == []


def test_throttle_storm_needs_count_and_time() -> None:
    storm = [Single(i * 30, "throttled", "User:a", "t", None, 1000) for i in range(10)]
    assert [f.detector for f in throttle_storms(storm, T)] == [kinds.THROTTLE_STORM]
    short = [Single(i * 30, "throttled", "User:a", "t", None, 999) for i in range(10)]
    assert throttle_storms(short, T) == []


def test_new_network_versus_a_known_one() -> None:
    known = HostRow("User:a", "10.1.1.1", 500, 10, DETECT + 5, DETECT + 9)
    pod = HostRow("User:a", "10.1.1.77", 0, 3, DETECT + 5, DETECT + 9)  # same /24
    stranger = HostRow("User:a", "10.99.0.1", 0, 3, DETECT + 60, DETECT + 90)
    rare = HostRow("User:a", "10.98.0.1", 2, 3, DETECT + 60, DETECT + 90)
    found = new_addresses([known, pod, stranger, rare], {"User:a": "t"}, T)
    assert {(f.evidence["address"], f.severity) for f in found} == {
        ("10.99.0.1", "high"),
        ("10.98.0.1", "medium"),
    }
    assert new_addresses([known, stranger], {}, T) == []  # no history, no judgement


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("203.0.113.5", "203.0.113"),
        ("2001:db8::10", "2001:db8::/64"),
        ("2001:db8:0:0:ffff::11", "2001:db8::/64"),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::/64"),
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("::ffff:203.0.113.7", "203.0.113"),
        ("fe80::1%eth0", "fe80::/64"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_a_network_is_the_same_however_its_address_is_written(host: str, expected: str) -> None:
    assert network(host) == expected
