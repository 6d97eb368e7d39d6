from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main


def test_check_config_reports_key_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "gw.yaml"
    bad.write_text("upstream: {bootstrap_servers: ['nope']}\nlisteners: []\n")
    assert main(["check-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "upstream.bootstrap_servers" in err and "listeners" in err


def test_check_config_accepts_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[2] / "examples" / "gateway.yaml"
    assert main(["check-config", "--schema-only", "--config", str(example)]) == 0
    assert "ok (schema only)" in capsys.readouterr().out
    # in full, as serve would load it: the example names a deployment's files
    assert main(["check-config", "--config", str(example)]) == 2
    assert "ca_files /etc/kgw/tls/brokers-ca.pem: cannot read" in capsys.readouterr().err


def _policy_config(tmp_path: Path, rule: str) -> Path:
    """A one-process gateway configuration whose policy is ``rule``."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "model.conf").write_text(
        (Path(__file__).parents[2] / "policies" / "model.conf").read_text()
    )
    (policies / "policy.csv").write_text(rule + "\n")
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:1']}\n"
        "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
        " advertised_host: localhost, max_node_id: 4}]\n"
        f"authorization: {{policy_dir: '{policies}'}}\n"
        "server: {workers: 1}\n"  # one process, in this one (workers: tests/unit/workers)
    )
    return config


def test_check_config_finds_what_would_stop_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _policy_config(tmp_path, "p, User:x, TOPIK, LITERAL, orders, READ, *, allow")
    assert main(["check-config", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "TOPIK" in err and "policy.csv" in err
    (tmp_path / "policies" / "policy.csv").write_text(
        "p, User:x, TOPIC, LITERAL, orders, READ, *, allow\n"
    )
    assert main(["check-config", "--config", str(config)]) == 0


def test_check_config_refuses_a_credential_file_others_may_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    creds = tmp_path / "credentials.json"
    creds.write_text('{"format": 1, "tables": {}}\n')
    creds.chmod(0o644)
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:1']}\n"
        "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
        " advertised_host: localhost, max_node_id: 4, authentication: sasl}]\n"
        f"sasl: {{mechanisms: [PLAIN], credential_store: {{file: '{creds}'}}}}\n"
    )
    assert main(["check-config", "--config", str(config)]) == 2
    assert "accessible by group or others" in capsys.readouterr().err
    creds.chmod(0o600)
    assert main(["check-config", "--config", str(config)]) == 0


def test_serve_refuses_a_bad_config_before_starting(tmp_path: Path) -> None:
    bad = tmp_path / "gw.yaml"
    bad.write_text("listeners: [}\n")
    assert main(["serve", "--config", str(bad)]) == 2


def test_serve_refuses_a_broken_policy(tmp_path: Path) -> None:
    rule = "p, User:alice, TOPIC, SOMETIMES, orders, READ, *, allow"
    assert main(["serve", "--config", str(_policy_config(tmp_path, rule))]) == 2


def test_each_command_builds_only_its_own_group() -> None:
    from gateway.cli import GROUPS, build_parser, groups_for

    full = build_parser()
    names = set(full._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    for name in names:
        (group,) = groups_for([name, "--help"])
        narrow = build_parser([group])
        assert name in narrow._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert groups_for([]) == GROUPS
    assert groups_for(["--version"]) == GROUPS
    assert groups_for(["no-such-command"]) == GROUPS


def test_analyze_does_not_import_the_gateway() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from gateway.cli import build_parser, groups_for; "
        "build_parser(groups_for(['analyze', '--logs', 'x'])); "
        "print(sorted(m for m in ('gateway.config', 'gateway.runtime', 'kio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
