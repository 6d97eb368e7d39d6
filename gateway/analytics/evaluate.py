"""Precision and recall of each detector against the simulator's labels.

A finding *names* a label's attack when its entity, principal or client address is
the label's entity or one of the label's ``entities`` (the attacker's addresses, the
victims), and their times overlap (with ``slack`` seconds either side, for hourly
buckets). Recall: labels named by a finding *of the label's detector* / labels.
Precision: findings that name some labelled attack, by whatever detector / findings
(the attacker or the victim of a labelled attack, at its time, is a correct finding
whichever detector raised it: a sustained exfiltration's busiest hour may well also
be a volume spike). :func:`overall` gives both over every detector at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .findings import Finding
from .kinds import DETECTORS
from .labels import Label

SLACK_S = 600.0


@dataclass(frozen=True, slots=True)
class Score:
    detector: str
    labels: int
    findings: int
    true_findings: int
    found_labels: int

    @property
    def precision(self) -> float:
        return self.true_findings / self.findings if self.findings else 1.0

    @property
    def recall(self) -> float:
        return self.found_labels / self.labels if self.labels else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "labels": self.labels,
            "findings": self.findings,
            "true_findings": self.true_findings,
            "found_labels": self.found_labels,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
        }


def related(finding: Finding, label: Label, slack: float = SLACK_S) -> bool:
    """The finding names the label's attacker or victim, at the time of the attack."""
    named = {label.entity, *label.detail.get("entities", ())}
    mine = {finding.entity, finding.principal, finding.client_host}
    return (
        bool(named & mine)
        and finding.start <= label.end + slack
        and label.start <= finding.end + slack
    )


def matches(finding: Finding, label: Label, slack: float = SLACK_S) -> bool:
    """``related``, by the label's own detector."""
    return finding.detector == label.detector and related(finding, label, slack)


def evaluate(findings: list[Finding], labels: list[Label], slack: float = SLACK_S) -> list[Score]:
    scores = []
    for detector in DETECTORS:
        mine = [f for f in findings if f.detector == detector]
        wanted = [label for label in labels if label.detector == detector]
        true_findings = sum(1 for f in mine if any(related(f, lb, slack) for lb in labels))
        found = sum(1 for lb in wanted if any(matches(f, lb, slack) for f in mine))
        scores.append(Score(detector, len(wanted), len(mine), true_findings, found))
    return scores


def overall(findings: list[Finding], labels: list[Label], slack: float = SLACK_S) -> Score:
    """Precision and recall over every detector at once."""
    true_findings = sum(1 for f in findings if any(related(f, lb, slack) for lb in labels))
    found = sum(1 for lb in labels if any(matches(f, lb, slack) for f in findings))
    return Score("all", len(labels), len(findings), true_findings, found)


def unmatched(
    findings: list[Finding], labels: list[Label], slack: float = SLACK_S
) -> tuple[list[Finding], list[Label]]:
    """False positives and missed labels, for reading what went wrong."""
    false_positives = [f for f in findings if not any(related(f, lb, slack) for lb in labels)]
    missed = [lb for lb in labels if not any(matches(f, lb, slack) for f in findings)]
    return false_positives, missed


def format_table(scores: list[Score]) -> str:
    """One line per score (``overall``'s last, when given)."""
    lines = [
        f"{'detector':<30} {'labels':>6} {'found':>6} {'findings':>8} {'precision':>9} "
        f"{'recall':>6}"
    ]
    for s in scores:
        lines.append(
            f"{s.detector:<30} {s.labels:>6} {s.found_labels:>6} {s.findings:>8} "
            f"{s.precision:>9.3f} {s.recall:>6.3f}"
        )
    return "\n".join(lines)
