"""Findings: what happened, who, when, the figures behind it, and how bad it is."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .kinds import DETECTORS, ENTITY, SEVERITIES
from .records import parse_rfc3339, rfc3339_ms


@dataclass(frozen=True, slots=True)
class Finding:
    detector: str
    severity: str  # low | medium | high | critical
    score: float  # how far past the detector's threshold (1.0 = just at it); sorts findings
    entity: str  # the principal or the client address the finding is about
    start: float  # epoch seconds
    end: float
    summary: str  # one sentence for a human
    evidence: dict[str, Any] = field(default_factory=dict)
    principal: str | None = None
    client_host: str | None = None
    tenant: str | None = None

    @property
    def id(self) -> str:
        key = f"{self.detector}|{self.entity}|{int(self.start)}"
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    @property
    def entity_type(self) -> str:
        return ENTITY[self.detector]

    @property
    def title(self) -> str:
        return DETECTORS[self.detector]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "detector": self.detector,
            "title": self.title,
            "severity": self.severity,
            "score": round(self.score, 3),
            "entity_type": self.entity_type,
            "entity": self.entity,
            "principal": self.principal,
            "client_host": self.client_host,
            "tenant": self.tenant,
            "start": rfc3339_ms(int(self.start * 1000)),
            "end": rfc3339_ms(int(self.end * 1000)),
            "summary": self.summary,
            "evidence": self.evidence,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            data["detector"],
            data["severity"],
            float(data["score"]),
            data["entity"],
            parse_rfc3339(data["start"]),
            parse_rfc3339(data["end"]),
            data["summary"],
            dict(data.get("evidence") or {}),
            data.get("principal"),
            data.get("client_host"),
            data.get("tenant"),
        )


def severity_at_least(level: str, floor: str) -> bool:
    return SEVERITIES.index(level) >= SEVERITIES.index(floor)


def rank(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then the furthest past its threshold, then the earliest (then
    by entity and detector, so the order does not depend on the detectors' order)."""
    return sorted(
        findings,
        key=lambda f: (-SEVERITIES.index(f.severity), -f.score, f.start, f.entity, f.detector),
    )


def merge_adjacent(findings: Iterable[Finding], gap: float = 0.0) -> list[Finding]:
    """One finding per run of a detector's buckets for one entity that touch (or nearly)."""
    merged: list[Finding] = []
    ordered = sorted(findings, key=lambda f: (f.detector, f.entity, f.start))
    for finding in ordered:
        last = merged[-1] if merged else None
        if (
            last is not None
            and (last.detector, last.entity) == (finding.detector, finding.entity)
            and finding.start <= last.end + gap
        ):
            stronger = finding if finding.score > last.score else last
            evidence = dict(stronger.evidence)
            evidence["buckets"] = int(last.evidence.get("buckets", 1)) + 1
            merged[-1] = replace(
                stronger,
                start=last.start,
                end=max(last.end, finding.end),
                severity=max(last.severity, finding.severity, key=SEVERITIES.index),
                evidence=evidence,
            )
        else:
            merged.append(finding)
    return merged


def write_findings_json(path: Path, findings: list[Finding], meta: dict[str, Any]) -> None:
    document = {**meta, "findings": [f.to_json() for f in findings]}
    path.write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")


def read_findings_json(path: Path) -> list[Finding]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return [Finding.from_json(item) for item in document["findings"]]


# The keys of ``Finding.to_json``, in its order: the columns of findings.parquet.
COLUMNS = (
    "id",
    "detector",
    "title",
    "severity",
    "score",
    "entity_type",
    "entity",
    "principal",
    "client_host",
    "tenant",
    "start",
    "end",
    "summary",
    "evidence",
)


def finding_rows(findings: list[Finding]) -> list[dict[str, Any]]:
    """Flat rows for Parquet: the evidence as a JSON string."""
    rows = []
    for finding in findings:
        row = finding.to_json()
        row["evidence"] = json.dumps(row["evidence"], sort_keys=True, default=str)
        rows.append(row)
    return rows


def write_findings_parquet(directory: Path, findings: list[Finding]) -> None:
    """The findings as ``directory/part-0.parquet`` (``directory`` replaced): the columns
    of :func:`finding_rows`, with ``start`` and ``end`` as UTC timestamps (to the
    millisecond, as in ``findings.json``) and ``score`` a double."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = finding_rows(findings)
    names = list(COLUMNS)
    when = pa.timestamp("us", tz="UTC")
    columns = {"score": pa.array([row["score"] for row in rows], pa.float64())}
    for name in ("start", "end"):
        micros = [int(getattr(f, name) * 1000) * 1000 for f in findings]
        columns[name] = pa.array(micros, pa.int64()).cast(when)
    for name in names:
        if name not in columns:
            columns[name] = pa.array([row[name] for row in rows], pa.string())
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    pq.write_table(
        pa.table([columns[name] for name in names], names=names), directory / "part-0.parquet"
    )
