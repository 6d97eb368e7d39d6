"""Findings (merging, ranking, JSON) and the precision/recall arithmetic."""

from __future__ import annotations

from pathlib import Path

from gateway.analytics import kinds
from gateway.analytics.evaluate import evaluate, format_table, matches, unmatched
from gateway.analytics.findings import (
    COLUMNS,
    Finding,
    finding_rows,
    merge_adjacent,
    rank,
    read_findings_json,
    write_findings_json,
)
from gateway.analytics.labels import Label

T0 = 1_793_318_400.0


def finding(
    detector: str,
    entity: str,
    start: float,
    end: float,
    score: float = 1.0,
    severity: str = "medium",
) -> Finding:
    return Finding(
        detector,
        severity,
        score,
        entity,
        start,
        end,
        f"{entity} did it",
        {"n": score},
        principal=entity,
    )


def label(detector: str, entity: str, start: float, end: float) -> Label:
    return Label(f"L-{entity}-{start}", "attack", detector, entity, start, end)


def test_adjacent_buckets_merge_into_one_finding() -> None:
    hours = [
        finding(kinds.VOLUME_SPIKE, "User:a", T0 + h * 3600, T0 + (h + 1) * 3600, score=h)
        for h in (1, 2, 3, 7)
    ]
    hours.append(finding(kinds.VOLUME_SPIKE, "User:b", T0 + 2 * 3600, T0 + 3 * 3600))
    merged = merge_adjacent(hours)
    assert [(f.entity, f.start, f.end) for f in merged] == [
        ("User:a", T0 + 3600, T0 + 4 * 3600),
        ("User:a", T0 + 7 * 3600, T0 + 8 * 3600),
        ("User:b", T0 + 2 * 3600, T0 + 3 * 3600),
    ]
    assert merged[0].score == 3 and merged[0].evidence["buckets"] == 3


def test_rank_puts_the_most_severe_first() -> None:
    low = finding(kinds.THROTTLE_STORM, "User:a", T0, T0, score=9, severity="low")
    high = finding(kinds.PROBING, "User:b", T0, T0, score=1, severity="high")
    higher = finding(kinds.PROBING, "User:c", T0, T0, score=2, severity="high")
    assert rank([low, high, higher]) == [higher, high, low]


def test_findings_round_trip_through_json(tmp_path: Path) -> None:
    original = [finding(kinds.SPRAYING, "10.0.0.1", T0, T0 + 60, score=2.5, severity="critical")]
    write_findings_json(tmp_path / "f.json", original, {"records": 1})
    assert read_findings_json(tmp_path / "f.json") == original
    row = finding_rows(original)[0]
    assert tuple(row) == COLUMNS  # the columns of findings.parquet
    assert row["evidence"] == '{"n": 2.5}' and row["entity_type"] == "address"
    assert row["start"] == "2026-10-30T00:00:00.000Z" and len(original[0].id) == 12


def test_matching_needs_detector_entity_and_overlapping_time() -> None:
    lb = label(kinds.DENIED_SPIKE, "User:a", T0 + 100, T0 + 200)
    assert matches(finding(kinds.DENIED_SPIKE, "User:a", T0, T0 + 3600), lb)
    assert matches(finding(kinds.DENIED_SPIKE, "User:a", T0 + 700, T0 + 800), lb)  # slack
    assert not matches(finding(kinds.DENIED_SPIKE, "User:a", T0 + 900, T0 + 990), lb)
    assert not matches(finding(kinds.DENIED_SPIKE, "User:b", T0, T0 + 3600), lb)
    assert not matches(finding(kinds.PROBING, "User:a", T0, T0 + 3600), lb)


def test_precision_and_recall_per_detector() -> None:
    labels = [label(kinds.PROBING, f"User:{n}", T0, T0 + 60) for n in "abcd"]
    findings = [
        finding(kinds.PROBING, "User:a", T0, T0 + 3600),
        finding(kinds.PROBING, "User:a", T0 + 3600, T0 + 7200),  # a second hour, too late
        finding(kinds.PROBING, "User:b", T0, T0 + 3600),
        finding(kinds.PROBING, "User:c", T0, T0 + 3600),
        finding(kinds.PROBING, "User:z", T0, T0 + 3600),  # false positive
    ]
    scores = {s.detector: s for s in evaluate(findings, labels)}
    probing = scores[kinds.PROBING]
    assert (probing.findings, probing.true_findings, probing.labels, probing.found_labels) == (
        5,
        3,
        4,
        3,
    )
    assert probing.precision == 0.6 and probing.recall == 0.75
    assert scores[kinds.SPRAYING].precision == 1.0 and scores[kinds.SPRAYING].recall == 1.0
    false_positives, missed = unmatched(findings, labels)
    assert [f.entity for f in false_positives] == ["User:a", "User:z"]
    assert [m.entity for m in missed] == ["User:d"]
    table = format_table(list(scores.values()))
    assert "topic_probing" in table and "0.600  0.750" in table
