"""``kgw audit``: exit codes and what an admin reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.audit import AuditTrail
from gateway.cli import main


def _make(tmp_path: Path, key_file: Path | None = None) -> Path:
    path = tmp_path / "audit.jsonl"
    trail = AuditTrail.open(path, key_file)
    trail.append("cli:alice", "policy.add", "policies/policy.csv", {"rules": []}, {"rules": [1]})
    trail.append("cli:bob", "quota.set", "tenant-a", {"rate": 1}, {"rate": 2})
    trail.append("cli:alice", "certs.revoke", "tenant-a/app", None, {"serial": "0a"})
    return path


def test_verify_passes_then_names_the_edited_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _make(tmp_path)
    assert main(["audit", "verify", "--file", str(path)]) == 0
    assert "ok:" in capsys.readouterr().out
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"rate": 2', '"rate": 200')
    path.write_text("\n".join(lines) + "\n")
    assert main(["audit", "verify", "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert "line 2 (seq 2): edited" in out and "FAILED: 1 problem" in out
    assert main(["audit", "verify", "--file", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == [
        {"line": 2, "seq": 2, "kind": "edited", "message": report["problems"][0]["message"]}
    ]


def test_keyed_trail_with_key_file_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "secret" / "audit.key"
    key.parent.mkdir()
    assert main(["audit", "keygen", "--out", str(key)]) == 0
    path = _make(tmp_path, key)
    assert main(["audit", "verify", "--file", str(path)]) == 1  # no key: cannot check HMACs
    monkeypatch.setenv("KGW_AUDIT_KEY_FILE", str(key))
    assert main(["audit", "verify", "--file", str(path)]) == 0
    assert "keyed (HMAC-SHA-256)" in capsys.readouterr().out
    assert key.read_text().strip() not in capsys.readouterr().out


def test_show_filters_and_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _make(tmp_path)
    assert main(["audit", "show", "--file", str(path), "--actor", "cli:alice", "--brief"]) == 0
    out = capsys.readouterr().out
    assert "#1 " in out and "#3 " in out and "#2 " not in out and "2 entries" in out
    assert main(["audit", "show", "--file", str(path), "--action", "quota.", "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["seq"] for e in shown] == [2]
    assert main(["audit", "head", "--file", str(path)]) == 0
    head = capsys.readouterr().out.split()
    assert head[:2] == ["seq", "3"]
    assert main(["audit", "verify", "--file", str(path), "--expect-head", head[3]]) == 0
    line = " ".join(head)  # the whole line pasted, as an admin does
    assert main(["audit", "verify", "--file", str(path), "--expect-head", line]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", "--file", str(path), "--expect-head", "seq 3"]) == 2
    assert "64-hex-digit hash" in capsys.readouterr().err


def test_append_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.jsonl"
    argv = ["audit", "append", "--file", str(path), "--actor", "runbook:ops"]
    assert main([*argv, "--action", "credentials.rotate", "--target", "ak_1", "--after", "{}"]) == 0
    assert main([*argv, "--action", "x", "--target", "y", "--after", "{nope"]) == 2
    assert main(["audit", "verify", "--file", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such audit trail" in capsys.readouterr().err
