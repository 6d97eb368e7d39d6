"""The README's main job: ``kgw dev up``, ``kgw dev demo``, ``kgw dev down`` on a fresh
directory — a 3-node cluster, the gateway with SASL, authorization, quotas, access
log and audit trail, a round trip, a tenant onboarded and confined, the trail verified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _kgw(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a parent that never reaps it does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_dev_stack_up_demo_down(tmp_path: Path) -> None:
    directory = tmp_path / "stack"
    up = _kgw("dev", "up", "--dir", str(directory))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        info = json.loads((directory / "stack.json").read_text())
        demo = _kgw("dev", "demo", "--dir", str(directory))
        assert demo.returncode == 0, demo.stdout + demo.stderr
        out = demo.stdout
        assert "consumed 10000 distinct records back through the gateway" in out
        assert "produced 1000 records to" in out and "consumed 1000 back" in out
        assert "refused, TOPIC_AUTHORIZATION_FAILED" in out
        assert out.rstrip().endswith("demo PASSED")
        trail = [json.loads(line) for line in (directory / "audit.jsonl").read_text().splitlines()]
        assert trail and all(entry["actor"].startswith("cli:") for entry in trail)
        bundle_secret = json.loads(
            next((directory / "tenants").glob("*/confluent-kafka.json")).read_text()
        )["sasl.password"]
        for log in (directory / "gateway").glob("*.log"):
            assert bundle_secret not in log.read_text(errors="replace")
        assert bundle_secret not in (directory / "audit.jsonl").read_text()
    finally:
        down = _kgw("dev", "down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert not (directory / "stack.json").exists()
    pids = [int(info["gateway"]["pid"]), *map(int, info["cluster_pids"].values())]
    assert [pid for pid in pids if _alive(pid)] == []
