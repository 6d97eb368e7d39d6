"""``kgw simulate``: realistic access logs (schema v1) with labelled attacks.

Writes ``OUT/logs/access-YYYY-MM-DD.jsonl`` (one file per day, time-ordered, as
the gateway's rotating writer would), ``OUT/labels.json`` (the injected attacks
and the detectors each should set off) and ``OUT/scenario.json`` (tenants and
principals, for reading the results).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .attacks import inject
from .labels import Label, write_labels
from .records import parse_rfc3339
from .scenario import HOUR, Scenario, build
from .traffic import Emitter, principal_traffic, rotation_failures
from .traps import Trap, set_traps

DEFAULT_START = "2026-11-02T00:00:00Z"


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    tenants: int = 8
    principals: int = 8  # per tenant
    hours: int = 72
    seed: int = 7
    attacks: int = 3  # per kind
    attack_hours: int = 24
    start: str = DEFAULT_START
    traps: bool = True  # benign changes that must raise no finding (.traps)


@dataclass(frozen=True, slots=True)
class SimulationResult:
    scenario: Scenario
    records: int
    labels: list[Label]
    log_dir: Path
    labels_path: Path
    seconds: float


class Simulated(NamedTuple):
    scenario: Scenario
    records: list[dict[str, Any]]
    labels: list[Label]
    traps: list[Trap]


def simulate(options: SimulationOptions) -> tuple[Scenario, list[dict[str, Any]], list[Label]]:
    """The scenario, its time-ordered records and its labels (nothing written)."""
    scenario, records, labels, _ = simulate_all(options)
    return scenario, records, labels


def simulate_all(options: SimulationOptions) -> Simulated:
    """The scenario, its time-ordered records, its labels and its benign traps (nothing
    written)."""
    start = int(parse_rfc3339(options.start)) // HOUR * HOUR
    scenario = build(
        options.seed,
        options.tenants,
        options.principals,
        options.hours,
        start,
        options.attack_hours,
    )
    em = Emitter(random.Random(options.seed * 7919 + 1))
    for principal in scenario.principals:
        principal_traffic(em, scenario, principal)
    rotation_failures(em, scenario)
    traps, spared = set_traps(em, scenario) if options.traps else ([], set())
    labels = inject(em, scenario, options.attacks, frozenset(spared)) if options.attacks else []
    records = [r for r in em.records if r["ts"] < _iso(scenario.end)]
    records.sort(key=lambda r: r["ts"])
    return Simulated(scenario, records, labels, traps)


def _iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(epoch))


def scenario_json(scenario: Scenario, options: SimulationOptions) -> dict[str, Any]:
    return {
        "options": asdict(options),
        "start": _iso(scenario.start),
        "end": _iso(scenario.end),
        "attack_from": _iso(scenario.attack_from),
        "tenants": [asdict(t) for t in scenario.tenants],
        "principals": [asdict(p) for p in scenario.principals],
    }


def write_simulation(out: Path, options: SimulationOptions) -> SimulationResult:
    began = time.monotonic()
    scenario, records, labels, traps = simulate_all(options)
    log_dir = out / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for old in log_dir.glob("access-*.jsonl"):
        old.unlink()
    handles: dict[str, Any] = {}
    try:
        for record in records:
            day = record["ts"][:10]
            handle = handles.get(day)
            if handle is None:
                handle = handles[day] = open(log_dir / f"access-{day}.jsonl", "w")  # noqa: SIM115
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    finally:
        for handle in handles.values():
            handle.close()
    description = scenario_json(scenario, options)
    labels_path = out / "labels.json"
    write_labels(
        labels_path,
        labels,
        {k: description[k] for k in ("options", "start", "end")},
        [trap.to_json() for trap in traps],
    )
    (out / "scenario.json").write_text(json.dumps(description, indent=1) + "\n")
    return SimulationResult(
        scenario, len(records), labels, log_dir, labels_path, time.monotonic() - began
    )
