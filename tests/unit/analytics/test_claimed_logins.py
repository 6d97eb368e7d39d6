"""Failed logins count against the identity the client claimed (docs/access-log.md).

Gateway records of failed logins carry ``principal: User:ANONYMOUS`` and the claim in
``claimed``; the burst and spraying detectors must see one key or user being attacked,
and records without ``claimed`` (older gateways, the simulator) keep their principal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.analytics import rollups
from gateway.analytics.detect import auth
from gateway.analytics.detect.context import Thresholds
from gateway.analytics.load import read_logs
from gateway.analytics.records import connection_record

START_MS = 1_793_318_400_000


def _failure(n: int, host: str, mechanism: str, claimed: str | None, principal: str) -> Any:
    record = connection_record(
        START_MS + n * 1000, "auth", instance="gw", conn=f"c{n}", host=host, port=1,
        principal=principal, mechanism=mechanism, outcome="failure", reason="wrong_secret",
    )  # fmt: skip
    record["claimed"] = claimed
    if mechanism == "PLAIN":
        record["api_key_id"] = claimed
    return record


def _singles(spark: Any, tmp_path: Path, records: list[dict[str, Any]]) -> list[Any]:
    path = tmp_path / "access.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    prepared = rollups.prepare(read_logs(spark, [str(path)], "json"))
    return rollups.singles(rollups.records(prepared))


def test_bursts_are_per_claimed_key_and_user(spark: Any, tmp_path: Path) -> None:
    anonymous = "User:ANONYMOUS"
    records = [_failure(n, "10.0.0.5", "PLAIN", "ak_target", anonymous) for n in range(12)]
    records += [
        _failure(20 + n, "10.0.0.6", "SCRAM-SHA-256", "alice", anonymous) for n in range(12)
    ]
    records += [_failure(40 + n, "10.0.0.7", "PLAIN", None, anonymous) for n in range(3)]
    records += [_failure(50 + n, "10.0.0.8", "PLAIN", "", "User:old-style") for n in range(12)]
    singles = _singles(spark, tmp_path, records)
    subjects = {s.principal for s in singles}
    assert subjects == {"ak_target", "User:alice", anonymous, "User:old-style"}
    findings = auth.auth_bursts(singles, Thresholds())
    per_principal = {f.principal for f in findings if f.detector == "auth_failure_burst_principal"}
    assert per_principal == {"ak_target", "User:alice", "User:old-style"}


def test_spraying_counts_claimed_names(spark: Any, tmp_path: Path) -> None:
    records = [_failure(n, "10.0.0.9", "PLAIN", f"ak_{n}", "User:ANONYMOUS") for n in range(10)]
    findings = auth.auth_bursts(_singles(spark, tmp_path, records), Thresholds())
    spraying = [f for f in findings if f.detector == "password_spraying"]
    assert len(spraying) == 1 and spraying[0].evidence["principals"] == 10
