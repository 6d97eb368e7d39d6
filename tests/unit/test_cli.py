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
    assert main(["check-config", "--config", str(example)]) == 0
    assert "ok" in capsys.readouterr().out


def test_serve_refuses_a_bad_config_before_starting(tmp_path: Path) -> None:
    bad = tmp_path / "gw.yaml"
    bad.write_text("listeners: [}\n")
    assert main(["serve", "--config", str(bad)]) == 2


def test_serve_refuses_a_broken_policy(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "model.conf").write_text(
        (Path(__file__).parents[2] / "policies" / "model.conf").read_text()
    )
    (policies / "policy.csv").write_text(
        "p, User:alice, TOPIC, SOMETIMES, orders, READ, *, allow\n"
    )
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:1']}\n"
        "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
        " advertised_host: localhost, max_node_id: 4}]\n"
        f"authorization: {{policy_dir: '{policies}'}}\n"
    )
    assert main(["serve", "--config", str(config)]) == 2
