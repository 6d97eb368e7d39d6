"""The response policy: findings to actions, expiry, the admin commands (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.analytics import kinds
from gateway.analytics.findings import Finding
from gateway.analytics.respond import Action, Responder, commands, expired, plan
from gateway.analytics.settings import ResponseConfig, ResponsePolicy, ResponseRule


def finding(detector: str, severity: str = "high", **kw: object) -> Finding:
    entity = str(kw.pop("entity", "10.1.2.3"))
    return Finding(detector, severity, 2.0, entity, 1000.0, 1100.0, "s", {}, **kw)  # type: ignore[arg-type]


POLICY = ResponsePolicy(
    rules=(
        ResponseRule(detector=kinds.AUTH_BURST_ADDRESS, action="block_address", expire_s=600),
        ResponseRule(detector=kinds.AUTH_BURST_PRINCIPAL, action="revoke_key"),
        ResponseRule(
            detector=kinds.DESTRUCTIVE_ADMIN, min_severity="critical", action="suspend_tenant"
        ),
    ),
    never_block=("10.9.0.0/16",),
)


def test_each_rule_maps_to_its_action_with_expiry() -> None:
    found = [
        finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3"),
        finding(kinds.AUTH_BURST_PRINCIPAL, entity="key-1", principal="key-1", tenant="a"),
        finding(
            kinds.DESTRUCTIVE_ADMIN, "critical", entity="User:a.x", principal="User:a.x", tenant="a"
        ),
    ]
    actions = plan(found, POLICY, now=50.0)
    assert [(a.kind, a.target, a.expires_at) for a in actions] == [
        ("block_address", "10.1.2.3", 650.0),
        ("revoke_key", "key-1", None),
        ("suspend_tenant", "a", None),
    ]
    assert actions[0].finding_id == found[0].id


def test_severity_floor_protected_targets_and_duplicates() -> None:
    found = [
        finding(kinds.DESTRUCTIVE_ADMIN, "high", tenant="a"),  # under critical
        finding(kinds.AUTH_BURST_ADDRESS, client_host="10.9.4.4"),  # never blocked
        finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3"),
        finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3"),  # same target once
        finding(kinds.AUTH_BURST_PRINCIPAL, principal="User:a.x"),  # not an API key
        finding(kinds.VOLUME_SPIKE),  # no rule
    ]
    actions = plan(found, POLICY, now=0.0)
    assert [(a.kind, a.target) for a in actions] == [("block_address", "10.1.2.3")]
    active = [Action("block_address", "10.1.2.3", "x", kinds.AUTH_BURST_ADDRESS, 600.0)]
    assert plan(found, POLICY, now=0.0, done=active) == []


def test_address_must_be_an_ip() -> None:
    bad = finding(kinds.AUTH_BURST_ADDRESS, entity="not-an-ip", client_host="evil;rm")
    assert plan([bad], POLICY, 0.0) == []


def test_expiry_lifts_only_expired_blocks() -> None:
    blocks = [
        Action("block_address", "10.0.0.1", "a", "d", 100.0),
        Action("block_address", "10.0.0.2", "b", "d", 300.0),
        Action("block_address", "10.0.0.3", "c", "d", None),  # permanent
    ]
    keep, lift = expired(blocks, now=200.0)
    assert [b.target for b in keep] == ["10.0.0.2", "10.0.0.3"]
    assert [(a.kind, a.target) for a in lift] == [("unblock_address", "10.0.0.1")]
    assert expired(blocks, now=100.0)[1][0].target == "10.0.0.1"  # at the expiry, lifted


def test_commands_use_the_audited_admin_paths() -> None:
    cfg = Path("/etc/kgw/gateway.yaml")
    block = commands(Action("block_address", "10.0.0.1", "a", "d"), cfg, "kgw-analyze")
    assert [argv[:2] for argv in block] == [["policy", "add"]] * 3
    for argv in block:
        assert argv[argv.index("--host") + 1] == "10.0.0.1" and "--deny" in argv
        assert argv[argv.index("--config") + 1] == str(cfg)
        assert argv[argv.index("--actor") + 1] == "kgw-analyze"
    assert [
        next(a for a in argv if a in ("--topic", "--group", "--cluster")) for argv in block
    ] == ["--topic", "--group", "--cluster"]
    lift = commands(Action("unblock_address", "10.0.0.1", "a", "d"), cfg, "x")
    assert lift[0][:2] == ["policy", "remove"] and "--deny" in lift[0]
    assert commands(Action("revoke_key", "k1", "a", "d"), cfg, "x")[0][:2] == ["apikey", "revoke"]
    assert commands(Action("suspend_tenant", "t", "a", "d"), cfg, "x")[0][-1] == "t"
    with pytest.raises(ValueError):
        commands(Action("format_disk", "t", "a", "d"), cfg, "x")


def test_dry_run_only_reports(tmp_path: Path) -> None:
    ran: list[list[str]] = []

    def runner(argv: list[str]) -> tuple[int, str]:
        ran.append(argv)
        return 0, ""

    config = ResponseConfig(policy_file=tmp_path / "p.yaml", gateway_config=tmp_path / "g.yaml")
    assert config.dry_run  # the default
    responder = Responder(config, POLICY, tmp_path / "state.json", runner)
    reports = responder.respond([finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3")], 0.0)
    assert ran == [] and reports[0]["dry_run"] and reports[0]["commands"]
    assert not (tmp_path / "state.json").exists()


def test_applied_blocks_persist_and_expire(tmp_path: Path) -> None:
    ran: list[list[str]] = []

    def runner(argv: list[str]) -> tuple[int, str]:
        ran.append(argv)
        return 0, "ok"

    config = ResponseConfig(
        policy_file=tmp_path / "p.yaml", gateway_config=tmp_path / "g.yaml", dry_run=False
    )
    state = tmp_path / "state.json"
    first = Responder(config, POLICY, state, runner)
    first.respond([finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3")], 0.0)
    assert len(ran) == 3 and state.exists()
    again = Responder(config, POLICY, state, runner)  # a restart
    assert again.respond([finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3")], 10.0) == []
    reports = again.respond([], 601.0)
    assert [r["action"] for r in reports] == ["unblock_address"] and ran[-1][1] == "remove"
    assert Responder(config, POLICY, state, runner).active == []


def test_a_failed_command_is_reported_and_not_remembered(tmp_path: Path) -> None:
    config = ResponseConfig(
        policy_file=tmp_path / "p.yaml", gateway_config=tmp_path / "g.yaml", dry_run=False
    )
    responder = Responder(config, POLICY, tmp_path / "s.json", lambda argv: (2, "bad config"))
    reports = responder.respond([finding(kinds.AUTH_BURST_ADDRESS, client_host="10.1.2.3")], 0.0)
    assert reports[0]["ok"] is False and responder.active == []
