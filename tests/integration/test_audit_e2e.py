"""The admin audit trail end to end: a real gateway with a keyed trail takes CreateAcls and
DeleteAcls from Kafka's own AclCommand and AlterClientQuotas from its ConfigCommand,
``kgw`` subprocesses change policies, quotas,
plans, API keys, SCRAM credentials and certificates, and ``kgw audit verify`` passes on
the result, lists every change with its actor, and fails on each kind of tampering.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.audit import write_new_key
from gateway.devstack.gateway_proc import GatewayProcess, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, gateway_log_events

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).parents[2] / "policies"
ADMIN_RULES = [
    "p, User:admin, CLUSTER, LITERAL, kafka-cluster, ALTER, *, allow",
    "p, User:admin, CLUSTER, LITERAL, kafka-cluster, DESCRIBE, *, allow",
    "p, User:admin, CLUSTER, LITERAL, kafka-cluster, ALTER_CONFIGS, *, allow",
]


def _kgw(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> str:
    """Run ``kgw`` as an operator would; its exit status must be 0."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KGW_AUDIT")}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        input=stdin.encode(),
        capture_output=True,
        env={**clean, **(env or {})},
        timeout=120,
        check=False,
    )
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, f"kgw {' '.join(args)} exited {done.returncode}: {out}"
    return out


def _verify(trail: Path, key: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "audit", "verify", "--file", str(trail),
         "--key-file", str(key), "--json"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def audited(
    gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[GatewayProcess, Path, Path, Path]:
    root = tmp_path_factory.mktemp("audited")
    policy_dir = root / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("\n".join(ADMIN_RULES) + "\n")
    key, trail = root / "audit.key", root / "audit" / "audit.jsonl"
    write_new_key(key)
    bootstrap, base = pick_ports()
    gateway = gateway_factory(
        listeners=[{
            "name": "admin", "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
            "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
            "principal": "User:admin",
        }],
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={"store_file": str(root / "quotas.json")},
        audit={"trail": str(trail), "key_file": str(key)},
    )  # fmt: skip
    return gateway, root, trail, key


def test_every_admin_path_lands_in_a_verifiable_trail(
    audited: tuple[GatewayProcess, Path, Path, Path], kafka_cluster: KafkaCluster
) -> None:
    gateway, root, trail, key = audited
    assert gateway_log_events(gateway, "audit_on"), gateway.log_tail()
    config = str(gateway.config_path)
    login = f"cli:{getpass.getuser()}"

    # Kafka's own AclCommand, through the gateway: CreateAcls, then DeleteAcls
    for action in ("--add", "--remove"):
        extra = ["--force"] if action == "--remove" else []
        done = kafka_cluster.run_tool("acls", [
            "--bootstrap-server", gateway.bootstrap, action, *extra,
            "--allow-principal", "User:audited-app", "--operation", "Read",
            "--topic", "audited-topic",
        ])  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-2000:]
    # and its ConfigCommand: AlterClientQuotas, answered from the gateway's quota store
    done = kafka_cluster.run_tool("configs", [
        "--bootstrap-server", gateway.bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "quota-user", "--add-config", "producer_byte_rate=1048576",
    ])  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]

    # the CLI, one change of each kind; the trail comes from the config, a flag, the env
    _kgw("policy", "add", "--config", config, "--principal", "User:cli-app",
         "--operation", "WRITE", "--topic", "cli-topic", "--actor", "cli:alice")  # fmt: skip
    _kgw("policy", "remove", "--config", config, "--principal", "User:cli-app")
    _kgw("quota", "set", "--config", config, "--tenant", "acme", "--produce-bytes", "1Mi",
         "--actor", "cli:bob")  # fmt: skip
    _kgw("quota", "plan", "set", "--config", config, "gold", "--fetch-bytes", "5Mi")
    _kgw("quota", "plan", "assign", "--config", config, "acme", "gold")
    flags = ["--audit-trail", str(trail), "--audit-key-file", str(key)]
    store = ["--store-file", str(root / "credentials.json")]
    created = json.loads(
        _kgw("apikey", "create", *store, *flags, "--tenant", "acme",
             "--principal", "User:acme.app", "--json").splitlines()[0]
    )  # fmt: skip
    _kgw("apikey", "revoke", *store, *flags, created["key_id"])
    password = "pw-" + os.urandom(12).hex()
    _kgw("scram", "add", *store, *flags, "carol", "--mechanism", "SCRAM-SHA-256",
         "--iterations", "4096", stdin=password + "\n")  # fmt: skip
    _kgw("scram", "remove", *store, *flags, "carol")
    env = {"KGW_AUDIT_TRAIL": str(trail), "KGW_AUDIT_KEY_FILE": str(key)}
    certs = ["certs", "--dir", str(root / "certs")]
    _kgw(*certs, "init-ca", "acme", env=env)
    _kgw(*certs, "client", "acme", "app1", "--actor", "cli:pki", env=env)
    _kgw(*certs, "revoke", "acme", "app1", "--reason", "superseded", env=env)

    code, report = _verify(trail, key)
    assert code == 0 and report["ok"], report
    entries = [json.loads(line) for line in trail.read_text().splitlines()]
    assert report["entries"] == len(entries)
    assert [(e["actor"], e["action"]) for e in entries] == [
        ("kafka:User:admin", "policy.add"),
        ("kafka:User:admin", "policy.remove"),
        ("kafka:User:admin", "quota.set"),
        ("cli:alice", "policy.add"),
        (login, "policy.remove"),
        ("cli:bob", "quota.set"),
        (login, "plan.set"),
        (login, "plan.assign"),
        (login, "apikey.create"),
        (login, "apikey.revoke"),
        (login, "scram.add"),
        (login, "scram.remove"),
        (login, "cert.ca_create"),
        ("cli:pki", "cert.issue"),
        (login, "cert.revoke"),
    ]
    assert entries[0]["after"]["rules"][0]["principal"] == "User:audited-app"
    assert entries[1]["before"]["rules"][0]["name"] == "audited-topic"
    assert entries[2]["target"] == "quotas/principal:User:quota-user"
    assert entries[2]["before"] is None
    assert entries[2]["after"] == {"produce_bytes": 1048576}
    assert entries[13]["after"]["sha256_fingerprint"].count(":") == 31
    text = trail.read_text()
    assert created["secret"] not in text and password not in text
    shown = _kgw("audit", "show", "--file", str(trail), "--actor", "kafka:User:admin", "--brief")
    assert "policy.add" in shown and "quota.set" in shown and "3 entries" in shown

    # tampering: each kind found, naming the entry
    lines = text.splitlines(keepends=True)
    edited = list(lines)
    edited[5] = edited[5].replace("cli:bob", "cli:eve")
    deleted = lines[:6] + lines[7:]
    reordered = [*lines[:8], lines[9], lines[8], *lines[10:]]
    for name, content, kind, says in (
        ("edited", edited, "edited", "seq 6"),  # line 6 (seq 6): edited
        ("deleted", deleted, "deleted", "seq 7 is missing"),
        ("reordered", reordered, "reordered", ""),
    ):
        copy = root / f"tampered-{name}.jsonl"
        copy.write_text("".join(content))
        shutil.copy(trail.with_name(trail.name + ".head"), copy.with_name(copy.name + ".head"))
        code, report = _verify(copy, key)
        assert code == 1 and not report["ok"], (name, report)
        found = [(p["kind"], f"seq {p['seq']}: {p['message']}") for p in report["problems"]]
        assert any(k == kind and says in msg for k, msg in found), (name, found)
    code, _ = _verify(trail, key)
    assert code == 0  # the original is untouched
