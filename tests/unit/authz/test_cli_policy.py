"""``kgw policy``: what a security admin types, what they see, and the exit codes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.authz.store import PolicyStore
from gateway.cli import main

from .conftest import REPO, PolicyDir, rule

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A copy of the shipped policies/ directory."""
    return Path(shutil.copytree(REPO / "policies", tmp_path / "policies"))


def test_the_shipped_policy_lints_clean(capsys: Capture) -> None:
    code, out, _ = run(capsys, "policy", "lint", "--policy-dir", str(REPO / "policies"))
    assert code == 0
    assert "ok (" in out


def test_explain_prints_the_decision_and_the_rule(sample: Path, capsys: Capture) -> None:
    code, out, _ = run(
        capsys,
        "policy",
        "explain",
        "--policy-dir",
        str(sample),
        "--principal",
        "User:a-ops",
        "--operation",
        "DELETE",
        "--topic",
        "tenant-a.audit",
        "--host",
        "10.0.0.1",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "DENIED: User:a-ops DELETE TOPIC 'tenant-a.audit' from host 10.0.0.1"
    assert "rule:  DENY Role:tenant-a-admins to DELETE on TOPIC 'tenant-a.audit'" in lines[1]
    assert "policy.csv line " in lines[1]
    assert "Role:tenant-a-admins" in lines[2]


def test_explain_without_a_match_says_deny_by_default(sample: Path, capsys: Capture) -> None:
    code, out, _ = run(
        capsys,
        "policy",
        "explain",
        "--policy-dir",
        str(sample),
        "--principal",
        "User:alice",
        "--operation",
        "write",
        "--group",
        "g",
    )
    assert code == 0
    assert out.startswith("DENIED: User:alice WRITE GROUP 'g' (no --host")
    assert "no matching allow rule (deny by default)" in out


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (["--cluster"], "IDEMPOTENT_WRITE CLUSTER 'kafka-cluster'"),
        (["--transactional-id", "tenant-a.tx"], "TRANSACTIONAL_ID 'tenant-a.tx'"),
    ],
)
def test_explain_other_resources(
    sample: Path, capsys: Capture, resource: list[str], expected: str
) -> None:
    operation = "IDEMPOTENT_WRITE" if "--cluster" in resource else "WRITE"
    code, out, _ = run(
        capsys,
        "policy",
        "explain",
        "--policy-dir",
        str(sample),
        "--principal",
        "User:a-orders-service",
        "--operation",
        operation,
        *resource,
    )
    assert code == 0
    assert out.startswith("ALLOWED: ") and expected in out


def test_explain_knows_the_configs_super_users(
    sample: Path, tmp_path: Path, capsys: Capture
) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\n"
        "listeners: [{name: p, bootstrap_port: 19092, broker_port_base: 19100,"
        " advertised_host: localhost}]\n"
        f"authorization: {{policy_dir: '{sample}', super_users: ['User:root']}}\n"
    )
    code, out, _ = run(
        capsys,
        "policy",
        "explain",
        "--config",
        str(config),
        "--principal",
        "User:root",
        "--operation",
        "ALTER",
        "--cluster",
    )
    assert code == 0
    assert "ALLOWED" in out and "super user" in out


def test_add_list_remove(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir("# mine\n"))
    code, out, _ = run(
        capsys,
        "policy",
        "add",
        "--policy-dir",
        directory,
        "--principal",
        "User:alice",
        "--principal",
        "Role:x",
        "--operation",
        "READ",
        "--operation",
        "WRITE",
        "--topic",
        "orders.",
        "--prefixed",
        "--host",
        "10.0.0.0/8",
        "--actor",
        "User:sec-admin",
    )
    assert code == 0
    assert out.count("added: ") == 4
    assert len(PolicyStore(directory).list()) == 4

    code, out, _ = run(
        capsys, "policy", "list", "--policy-dir", directory, "--principal", "User:alice"
    )
    assert code == 0
    assert out.splitlines()[0].split() == [
        "LINE",
        "PERMISSION",
        "PRINCIPAL",
        "OPERATION",
        "RESOURCE",
        "PATTERN",
        "NAME",
        "HOST",
    ]
    assert out.splitlines()[1].split() == [
        "2",
        "ALLOW",
        "User:alice",
        "READ",
        "TOPIC",
        "PREFIXED",
        "orders.",
        "10.0.0.0/8",
    ]
    assert out.splitlines()[-1] == "2 rule(s)"

    code, out, _ = run(
        capsys,
        "policy",
        "remove",
        "--policy-dir",
        directory,
        "--principal",
        "Role:x",
        "--topic",
        "orders.",
        "--dry-run",
    )
    assert (code, out.splitlines()[-1]) == (0, "0 rule(s) would be removed")  # LITERAL by default
    code, out, _ = run(
        capsys,
        "policy",
        "remove",
        "--policy-dir",
        directory,
        "--principal",
        "Role:x",
        "--topic",
        "orders.",
        "--prefixed",
    )
    assert (code, out.splitlines()[-1]) == (0, "2 rule(s) removed")
    assert [r.principal for r in PolicyStore(directory).list()] == ["User:alice"] * 2
    assert (Path(directory) / "policy.csv").read_text().startswith("# mine\n")


def test_add_deny(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir())
    code, _, _ = run(
        capsys,
        "policy",
        "add",
        "--policy-dir",
        directory,
        "--principal",
        "User:*",
        "--operation",
        "ALL",
        "--group",
        "secret",
        "--deny",
    )
    assert code == 0
    assert PolicyStore(directory).list() == [
        rule("p, User:*, GROUP, LITERAL, secret, ALL, *, deny")
    ]


def test_remove_refuses_to_match_everything(policy_dir: PolicyDir, capsys: Capture) -> None:
    code, _, err = run(capsys, "policy", "remove", "--policy-dir", str(policy_dir()))
    assert code == 2 and "refusing" in err


def test_roles(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir("p, Role:x, TOPIC, LITERAL, t, READ, *, allow\n"))
    assert (
        run(
            capsys,
            "policy",
            "role",
            "add",
            "--policy-dir",
            directory,
            "--member",
            "User:a",
            "--role",
            "Role:x",
        )[0]
        == 0
    )
    code, out, _ = run(capsys, "policy", "role", "list", "--policy-dir", directory)
    assert (code, out) == (0, "Role:x: User:a\n")
    code, out, _ = run(
        capsys,
        "policy",
        "explain",
        "--policy-dir",
        directory,
        "--principal",
        "User:a",
        "--operation",
        "DESCRIBE",
        "--topic",
        "t",
    )
    assert out.startswith("ALLOWED") and "roles: Role:x" in out
    assert (
        run(
            capsys,
            "policy",
            "role",
            "remove",
            "--policy-dir",
            directory,
            "--member",
            "User:a",
            "--role",
            "Role:x",
        )[0]
        == 0
    )
    assert PolicyStore(directory).roles() == {}


def test_lint_errors_exit_1_and_name_the_line(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir("# ok\np, User:a, TOPIC, LITERAL, t, READ, 10.0.0.1/8, allow\n"))
    code, out, _ = run(capsys, "policy", "lint", "--policy-dir", directory)
    assert code == 1
    assert "policy.csv:2: error: CIDR '10.0.0.1/8' has host bits set" in out


def test_lint_warnings_pass_unless_strict(policy_dir: PolicyDir, capsys: Capture) -> None:
    line = "p, User:a, TOPIC, LITERAL, t, READ, *, allow\n"
    directory = str(policy_dir(line * 2))
    code, out, _ = run(capsys, "policy", "lint", "--policy-dir", directory)
    assert code == 0 and "policy.csv:2: warning: duplicate of line 1" in out
    assert run(capsys, "policy", "lint", "--policy-dir", directory, "--strict")[0] == 1


def test_lint_a_candidate_file(policy_dir: PolicyDir, tmp_path: Path, capsys: Capture) -> None:
    candidate = tmp_path / "next.csv"
    candidate.write_text("g, Role:a, Role:b\ng, Role:b, Role:a\n")
    code, out, _ = run(
        capsys, "policy", "lint", "--policy-dir", str(policy_dir()), "--file", str(candidate)
    )
    assert code == 1 and "cycle" in out


def test_lint_a_broken_model(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir("", model="[matchers]\nm = true\n"))
    code, out, _ = run(capsys, "policy", "lint", "--policy-dir", directory)
    assert code == 1 and "model.conf: error" in out


def test_an_invalid_rule_is_refused_with_exit_1(policy_dir: PolicyDir, capsys: Capture) -> None:
    directory = str(policy_dir())
    code, _, err = run(
        capsys,
        "policy",
        "add",
        "--policy-dir",
        directory,
        "--principal",
        "alice",
        "--operation",
        "READ",
        "--topic",
        "t",
    )
    assert code == 1 and "Type:name" in err
    code, _, err = run(
        capsys,
        "policy",
        "add",
        "--policy-dir",
        directory,
        "--principal",
        "User:a",
        "--operation",
        "READS",
        "--topic",
        "t",
    )
    assert code == 2 and "unknown operation 'READS'" in err
    code, _, err = run(
        capsys,
        "policy",
        "add",
        "--policy-dir",
        directory,
        "--principal",
        "User:a",
        "--operation",
        "READ",
    )
    assert code == 2 and "name a resource" in err
    assert PolicyStore(directory).list() == []


def test_a_config_without_authorization(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = run(capsys, "policy", "list", "--config", str(tmp_path / "missing.yaml"))
    assert code == 2 and "configuration error" in err
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\n"
        "listeners: [{name: p, bootstrap_port: 19092, broker_port_base: 19100,"
        " advertised_host: localhost}]\n"
    )
    code, _, err = run(capsys, "policy", "list", "--config", str(config))
    assert code == 2 and "has no authorization section" in err


def test_init_writes_a_working_empty_policy(tmp_path: Path, capsys: Capture) -> None:
    directory = tmp_path / "fresh"
    assert run(capsys, "policy", "init", "--policy-dir", str(directory))[0] == 0
    assert (directory / "model.conf").read_text() == (REPO / "policies" / "model.conf").read_text()
    assert run(capsys, "policy", "lint", "--policy-dir", str(directory))[0] == 0
    code, out, _ = run(capsys, "policy", "init", "--policy-dir", str(directory))
    assert code == 0 and out.count("kept existing") == 2


def test_the_shipped_model_is_the_packaged_one() -> None:
    from gateway.authz.casbin_model import MODEL_CONF

    assert (REPO / "policies" / "model.conf").read_text() == MODEL_CONF
