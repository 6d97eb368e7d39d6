"""``kgw quota`` against a file store and a gateway configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli import main

Capsys = pytest.CaptureFixture[str]


def kgw(*args: str) -> int:
    return main(["quota", *args])


def test_set_get_list_delete(tmp_path: Path, capsys: Capsys) -> None:
    store = str(tmp_path / "q.json")
    assert (
        kgw(
            "set",
            "--file",
            store,
            "--tenant",
            "acme",
            "--produce-bytes",
            "1Mi",
            "--produce-burst",
            "4Mi",
            "--requests",
            "200",
            "--actor",
            "ops:ann",
        )
        == 0
    )
    assert "tenant:acme: produce_bytes=1048576 produce_bytes_burst=4194304 requests=200" in (
        capsys.readouterr().out
    )
    assert kgw("set", "--file", store, "--api-key", "k1", "--produce-bytes", "500k") == 0
    assert kgw("set", "--file", store, "--ip", "10.1.1.1", "--connection-rate", "4") == 0
    assert (
        kgw(
            "set",
            "--file",
            store,
            "--principal",
            "User:x",
            "--fetch-bytes",
            "100",
            "--requests",
            "10",
            "--requests-burst",
            "1",
            "--burst",
            "3",
        )
        == 0
    )
    assert (
        "principal:User:x: fetch_bytes=100 fetch_bytes_burst=300 requests=10 requests_burst=1"
        in (capsys.readouterr().out)
    )
    assert kgw("get", "--file", store, "--tenant", "acme", "--api-key", "k1") == 0
    out = capsys.readouterr().out
    assert "produce_bytes: rate=500000/s burst=500000 from api-key:k1" in out
    assert "requests: rate=200/s burst=200 from tenant:acme" in out
    assert "fetch_bytes: unlimited" in out
    assert kgw("set", "--file", store, "--tenant", "acme", "--remove", "requests") == 0
    assert kgw("list", "--file", store) == 0
    out = capsys.readouterr().out
    assert "api-key:k1: produce_bytes=500000" in out and "4 target(s)" in out
    assert "tenant:acme: produce_bytes=1048576 produce_bytes_burst=4194304\n" in out
    assert kgw("delete", "--file", store, "--api-key", "k1") == 0
    assert "api-key:k1" not in json.loads(Path(store).read_text())["quotas"]


def test_plans(tmp_path: Path, capsys: Capsys) -> None:
    store = str(tmp_path / "q.json")
    assert (
        kgw(
            "plan",
            "set",
            "silver",
            "--file",
            store,
            "--produce-bytes",
            "2Mi",
            "--max-topics",
            "20",
            "--max-retention-ms",
            "604800000",
        )
        == 0
    )
    assert kgw("plan", "assign", "acme", "silver", "--file", store) == 0
    assert kgw("plan", "assign", "acme", "platinum", "--file", store) == 1
    assert "unknown plan 'platinum' (known: silver)" in capsys.readouterr().err
    assert kgw("plan", "list", "--file", store) == 0
    out = capsys.readouterr().out
    assert "silver [store]: max_retention_ms=604800000 max_topics=20 produce_bytes=2097152" in out
    assert "tenant acme: silver" in out
    assert kgw("plan", "unassign", "acme", "--file", store) == 0
    assert kgw("plan", "remove", "silver", "--file", store) == 0
    assert json.loads(Path(store).read_text()) == {"plans": {}, "quotas": {}, "tenants": {}}


def test_the_gateway_configuration_names_the_store_and_plans(
    tmp_path: Path, capsys: Capsys
) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\n"
        "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
        " advertised_host: localhost, max_node_id: 4}]\n"
        f"quotas: {{store_file: '{tmp_path / 'q.json'}', default_plan: bronze,"
        " plans: {bronze: {fetch_bytes: 1000}, gold: {fetch_bytes: 9000}}}\n"
    )
    assert kgw("plan", "assign", "acme", "gold", "--config", str(config)) == 0
    assert kgw("get", "--config", str(config), "--tenant", "acme") == 0
    out = capsys.readouterr().out
    assert "plan of tenant acme: gold" in out
    assert "fetch_bytes: rate=9000/s burst=9000 from plan:gold (tenant:acme)" in out
    assert kgw("plan", "list", "--config", str(config)) == 0
    assert "bronze (default) [config]: fetch_bytes=1000" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["set", "--tenant", "a"], 2, "nothing to set"),
        (["set", "--tenant", "a", "--api-key", "k", "--requests", "1"], 2, "exactly one"),
        (["set", "--ip", "1.2.3.4", "--produce-bytes", "1"], 1, "not settable on ip"),
        (["set", "--tenant", "a", "--remove", "bogus"], 1, "unknown quota key"),
        (["plan", "set", "p", "--max-topics", "-1"], 2, ""),  # argparse: not a number
    ],
)
def test_bad_command_lines(
    tmp_path: Path, capsys: Capsys, args: list[str], code: int, words: str
) -> None:
    try:
        result = kgw(*args, "--file", str(tmp_path / "q.json"))
    except SystemExit as exc:  # argparse refuses the value itself
        result = int(str(exc.code))
    assert result == code
    assert words in capsys.readouterr().err
