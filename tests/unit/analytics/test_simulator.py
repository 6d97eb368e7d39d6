"""The simulator: deterministic, schema v1, attacks where the labels say."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from gateway.analytics import kinds
from gateway.analytics.bulk import rename_host, rename_principal
from gateway.analytics.labels import read_labels
from gateway.analytics.records import FIELDS, parse_rfc3339
from gateway.analytics.simulate import SimulationOptions, simulate, write_simulation

SMALL = SimulationOptions(tenants=3, principals=5, hours=48, attacks=1)


def test_same_seed_same_logs_other_seed_other_logs() -> None:
    _, first, labels = simulate(SMALL)
    _, again, labels_again = simulate(SMALL)
    assert first == again and labels == labels_again
    _, other, _ = simulate(SimulationOptions(tenants=3, principals=5, hours=48, seed=8))
    assert other != first


def test_records_follow_schema_v1() -> None:
    scenario, records, _ = simulate(SMALL)
    assert len(records) > 10_000
    assert [r["ts"] for r in records] == sorted(r["ts"] for r in records)
    for record in records[:: max(1, len(records) // 2000)]:
        assert tuple(record) == FIELDS and record["v"] == 1
        assert scenario.start <= parse_rfc3339(record["ts"]) < scenario.end
        assert record["ts"].endswith("Z") and len(record["ts"]) == 24
        if record["type"] == "request":
            assert record["event"] == "request"
            assert record["principal"].startswith("User:")
            assert record["decision"] in ("allow", "deny")
            assert record["error_code"] == (29 if record["decision"] == "deny" else 0)
            assert isinstance(record["topics"], list) and record["partitions"] == len(
                record["topics"]
            )
        else:
            assert record["event"] in ("open", "tls", "auth", "close")
            assert record["api"] is None


def test_ordinary_traffic_has_the_noise_of_a_real_log() -> None:
    _, records, _ = simulate(SimulationOptions(tenants=3, principals=5, hours=48, attacks=0))
    failures = [r for r in records if r["event"] == "auth" and r["outcome"] == "failure"]
    denied = [r for r in records if r["decision"] == "deny"]
    throttled = [r for r in records if (r["throttle_ms"] or 0) > 0]
    assert failures and denied and throttled
    per_principal = collections.Counter(r["principal"] for r in failures)
    assert max(per_principal.values()) < 12  # no burst without an attack
    hosts = collections.Counter(r["client_host"] for r in records if r["type"] == "request")
    assert len(hosts) > 15


def test_every_detector_has_labels_inside_the_attack_window(tmp_path: Path) -> None:
    result = write_simulation(tmp_path, SimulationOptions(tenants=8, principals=6, attacks=2))
    labels = read_labels(result.labels_path)
    assert labels == result.labels
    per_detector = collections.Counter(label.detector for label in labels)
    assert set(per_detector) == set(kinds.DETECTORS)
    assert all(count >= 2 for count in per_detector.values())
    window = (result.scenario.attack_from, result.scenario.end)
    assert all(window[0] <= label.start <= label.end <= window[1] for label in labels)
    victims = collections.defaultdict(set)
    for label in labels:
        if kinds.ENTITY[label.detector] == "principal":
            victims[label.entity].add(label.detail["attack_id"])
    assert all(len(ids) == 1 for ids in victims.values()), "one attack per victim"
    files = sorted(p.name for p in result.log_dir.iterdir())
    assert files == [
        "access-2026-11-02.jsonl",
        "access-2026-11-03.jsonl",
        "access-2026-11-04.jsonl",
    ]
    first = json.loads((result.log_dir / files[0]).read_text().splitlines()[0])
    assert first["v"] == 1
    scenario = json.loads((tmp_path / "scenario.json").read_text())
    assert len(scenario["principals"]) == 48
    assert {t["kind"] for t in json.loads(result.labels_path.read_text())["traps"]} == {
        "sale_day",
        "new_topic",
        "key_rotation",
        "address_move",
        "routine_admin",
    }


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="hours"):
        simulate(SimulationOptions(hours=30))


def test_bulk_renaming_keeps_networks_apart() -> None:
    assert rename_principal("User:a", 0) == "User:a"
    assert rename_principal("User:a", 3) == "User:a-r3"
    assert rename_host("10.4.12.7", 0) == "10.4.12.7"
    assert rename_host("10.4.12.7", 26) == "fd00:1a:4:12::7"


def test_a_small_scenario_whose_traps_take_every_principal_still_simulates() -> None:
    """Two tenants of three principals: the benign traps and the attacks use up every
    principal, and the newcomer that probes still finds a principal to copy."""
    options = SimulationOptions(tenants=2, principals=3, hours=48, attacks=1)
    _, records, labels = simulate(options)
    assert records
    assert kinds.NEW_PRINCIPAL_PROBING in {label.detector for label in labels}
