"""Ground truth for evaluation: which detector should fire, for whom, when."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kinds import DETECTORS
from .records import parse_rfc3339, rfc3339_ms


@dataclass(frozen=True, slots=True)
class Label:
    id: str
    attack: str  # the injected attack (one attack may call for several detectors)
    detector: str
    entity: str  # a principal or a client address, as the detector names it
    start: float  # epoch seconds
    end: float
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "attack": self.attack,
            "detector": self.detector,
            "entity": self.entity,
            "start": rfc3339_ms(int(self.start * 1000)),
            "end": rfc3339_ms(int(self.end * 1000)),
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Label:
        if data["detector"] not in DETECTORS:
            raise ValueError(f"label {data.get('id')}: unknown detector {data['detector']!r}")
        return cls(
            str(data["id"]),
            str(data["attack"]),
            str(data["detector"]),
            str(data["entity"]),
            parse_rfc3339(data["start"]),
            parse_rfc3339(data["end"]),
            dict(data.get("detail") or {}),
        )


def write_labels(
    path: Path,
    labels: list[Label],
    scenario: dict[str, Any],
    traps: list[dict[str, Any]] | None = None,
) -> None:
    """``traps``: the benign changes of the scenario (:mod:`.traps`), for reading."""
    document: dict[str, Any] = {"scenario": scenario, "labels": [lb.to_json() for lb in labels]}
    if traps is not None:
        document["traps"] = traps
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def read_labels(path: Path) -> list[Label]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return [Label.from_json(item) for item in document["labels"]]
