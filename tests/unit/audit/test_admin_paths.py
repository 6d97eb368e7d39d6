"""Every admin command that changes state appends to the trail: who, what, before/after.

The commands run in-process (``gateway.cli.main``) against real files; secrets that
pass through them (API key secrets, SCRAM passwords, private keys) must never reach
the trail.
"""

from __future__ import annotations

import getpass
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from gateway.audit import AuditTrail, write_new_key
from gateway.audit.admin import TRAIL_ENV
from gateway.audit.trail import KEY_ENV
from gateway.authz.casbin_model import MODEL_CONF
from gateway.cli import main


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRAIL_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)


def _policies(tmp_path: Path) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "model.conf").write_text(MODEL_CONF)
    (directory / "policy.csv").write_text("")
    return directory


def _entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_policy_changes_are_recorded_with_the_actor(tmp_path: Path) -> None:
    policies, trail = _policies(tmp_path), tmp_path / "audit.jsonl"
    where = ["--policy-dir", str(policies), "--audit-trail", str(trail)]
    assert main(["policy", "add", *where, "--principal", "User:alice", "--operation", "READ",
                 "--topic", "orders", "--actor", "cli:alice"]) == 0  # fmt: skip
    assert main(["policy", "role", "add", *where, "--member", "User:bob",
                 "--role", "Role:readers"]) == 0  # fmt: skip
    assert main(["policy", "remove", *where, "--principal", "User:alice", "--dry-run"]) == 0
    assert main(["policy", "remove", *where, "--principal", "User:alice",
                 "--actor", "cli:carol"]) == 0  # fmt: skip
    entries = _entries(trail)
    assert [(e["actor"], e["action"]) for e in entries] == [
        ("cli:alice", "policy.add"),
        (f"cli:{getpass.getuser()}", "policy.add_role_member"),  # the OS login by default
        ("cli:carol", "policy.remove"),
    ]  # the dry run changed nothing, so recorded nothing
    assert entries[0]["after"]["rules"][0]["name"] == "orders"
    assert entries[2]["before"]["rules"][0]["principal"] == "User:alice"
    assert AuditTrail(trail).verify().ok


def test_quota_and_plan_changes_are_recorded(tmp_path: Path) -> None:
    trail, store = tmp_path / "audit.jsonl", tmp_path / "quotas.json"
    where = ["--file", str(store), "--audit-trail", str(trail), "--actor", "cli:ops"]
    assert main(["quota", "set", *where, "--tenant", "acme", "--produce-bytes", "1Mi"]) == 0
    assert main(["quota", "set", *where, "--tenant", "acme", "--produce-bytes", "2Mi"]) == 0
    assert main(["quota", "plan", "set", *where, "gold", "--fetch-bytes", "5Mi"]) == 0
    assert main(["quota", "plan", "assign", *where, "acme", "gold"]) == 0
    assert main(["quota", "delete", *where, "--tenant", "acme"]) == 0
    assert main(["quota", "list", "--file", str(store)]) == 0  # reads: not recorded
    entries = _entries(trail)
    assert [(e["action"], e["target"]) for e in entries] == [
        ("quota.set", "quotas/tenant:acme"),
        ("quota.set", "quotas/tenant:acme"),
        ("plan.set", "plans/gold"),
        ("plan.assign", "tenants/acme"),
        ("quota.remove", "quotas/tenant:acme"),
    ]
    assert {e["actor"] for e in entries} == {"cli:ops"}
    assert entries[1]["before"] == {"produce_bytes": 2**20}
    assert entries[1]["after"] == {"produce_bytes": 2 * 2**20}
    assert entries[3]["after"] == "gold"
    assert entries[4]["after"] is None


def test_credential_changes_are_recorded_without_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trail, store = tmp_path / "audit.jsonl", tmp_path / "creds.json"
    monkeypatch.setenv(TRAIL_ENV, str(trail))  # the environment names the trail here
    where = ["--store-file", str(store), "--actor", "cli:admin"]
    assert main(["apikey", "create", *where, "--tenant", "acme",
                 "--principal", "User:acme.app", "--json"]) == 0  # fmt: skip
    created = json.loads(capsys.readouterr().out)
    assert main(["apikey", "revoke", *where, created["key_id"]]) == 0
    password = "scram-" + os.urandom(8).hex()
    monkeypatch.setattr("sys.stdin", io.StringIO(password + "\n"))
    assert main(["scram", "add", *where, "bob", "--mechanism", "SCRAM-SHA-512",
                 "--iterations", "4096"]) == 0  # fmt: skip
    stored = json.loads(store.read_text())  # the hash, salt and keys, to look for below
    assert main(["scram", "remove", *where, "bob"]) == 0
    text = trail.read_text()
    entries = _entries(trail)
    assert [(e["action"], e["target"]) for e in entries] == [
        ("apikey.create", f"apikey:{created['key_id']}"),
        ("apikey.revoke", f"apikey:{created['key_id']}"),
        ("scram.add", "scram:SCRAM-SHA-512:bob"),
        ("scram.remove", "scram:SCRAM-SHA-512:bob"),
    ]
    assert entries[1]["before"]["state"] == "active"
    assert entries[1]["after"]["state"] == "revoked"
    assert entries[2]["after"]["iterations"] == 4096
    secrets_seen = [created["secret"], password]
    for table in stored["tables"].values():
        for record in table.values():
            secrets_seen += [
                str(record[k])
                for k in ("secret_hash", "salt", "stored_key", "server_key")
                if k in record
            ]
    assert len(secrets_seen) == 2 + 1 + 3  # secret, password, its hash, salt and SCRAM keys
    for secret in secrets_seen:
        assert secret not in text
    for field in ("secret", "secret_hash", "salt", "stored_key", "server_key", "password"):
        assert f'"{field}"' not in text
    assert main(["audit", "verify"]) == 0  # $KGW_AUDIT_TRAIL names the trail here too


def test_certificate_changes_record_fingerprints_never_keys(tmp_path: Path) -> None:
    trail, root = tmp_path / "audit.jsonl", tmp_path / "certs"
    audit = ["--audit-trail", str(trail), "--actor", "cli:pki"]
    assert main(["certs", "--dir", str(root), "init-ca", "acme", *audit]) == 0
    assert main(["certs", "--dir", str(root), "client", "acme", "app1", *audit]) == 0
    assert main(["certs", "--dir", str(root), "revoke", "acme", "app1",
                 "--reason", "key_compromise", *audit]) == 0  # fmt: skip
    assert main(["certs", "--dir", str(root), "list"]) == 0  # a read: not recorded
    entries = _entries(trail)
    assert [(e["actor"], e["action"], e["target"]) for e in entries] == [
        ("cli:pki", "cert.ca_create", "ca:acme"),
        ("cli:pki", "cert.issue", "cert:acme/app1"),
        ("cli:pki", "cert.revoke", "cert:acme/app1"),
    ]
    issued = x509.load_pem_x509_certificates((root / "acme/issued/app1.pem").read_bytes())[0]
    fingerprint = issued.fingerprint(hashes.SHA256()).hex(":").upper()
    assert entries[1]["after"]["sha256_fingerprint"] == fingerprint
    assert entries[1]["after"]["serial"] == f"{issued.serial_number:x}"
    assert entries[1]["after"]["subject"] == "CN=app1"
    assert entries[1]["after"]["not_after"].startswith(f"{issued.not_valid_after_utc:%Y-%m-%d}")
    assert entries[2]["before"]["revoked_at"] is None
    assert entries[2]["after"]["revocation_reason"] == "key_compromise"
    text = trail.read_text()
    for key_file in (root / "acme/ca.key", root / "acme/issued/app1.key"):
        body = "".join(key_file.read_text().splitlines()[1:-1])
        assert body[:40] not in text and "PRIVATE KEY" not in text


def test_the_configs_audit_section_names_a_keyed_trail(tmp_path: Path) -> None:
    policies, trail, key = _policies(tmp_path), tmp_path / "audit.jsonl", tmp_path / "audit.key"
    write_new_key(key)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [{"name": "a", "bootstrap_port": 19092, "broker_port_base": 19100,
                       "advertised_host": "127.0.0.1"}],
        "authorization": {"policy_dir": str(policies)},
        "audit": {"trail": str(trail), "key_file": str(key)},
    }))  # fmt: skip
    assert main(["policy", "add", "--config", str(config), "--principal", "User:a",
                 "--operation", "WRITE", "--topic", "t"]) == 0  # fmt: skip
    assert AuditTrail.open(trail, key).verify().ok
    assert AuditTrail.open(trail, key).keyed
    assert main(["audit", "verify", "--file", str(trail)]) == 1  # keyed, checked without the key
    assert main(["audit", "verify", "--config", str(config)]) == 0  # its trail and its key


def test_without_a_trail_the_change_is_made_and_said_to_be_unrecorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies = _policies(tmp_path)
    assert main(["policy", "add", "--policy-dir", str(policies), "--principal", "User:a",
                 "--operation", "READ", "--topic", "t"]) == 0  # fmt: skip
    assert "User:a" in (policies / "policy.csv").read_text()
    assert "1 change(s) not recorded in an audit trail" in capsys.readouterr().err


def test_a_damaged_trail_refuses_the_change_before_it_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies, trail = _policies(tmp_path), tmp_path / "audit.jsonl"
    AuditTrail(trail).append("cli:a", "policy.add", "x")
    with trail.open("ab") as handle:
        handle.write(b'{"seq": 2, "half a line')
    before = (policies / "policy.csv").read_text()
    code = main(["policy", "add", "--policy-dir", str(policies), "--audit-trail", str(trail),
                 "--principal", "User:a", "--operation", "READ", "--topic", "t"])  # fmt: skip
    assert code == 2
    assert "last line is incomplete" in capsys.readouterr().err
    assert (policies / "policy.csv").read_text() == before
    store = tmp_path / "quotas.json"
    assert main(["quota", "set", "--file", str(store), "--audit-trail", str(trail),
                 "--tenant", "acme", "--requests", "10"]) == 2  # fmt: skip
    assert not store.exists()


def test_a_key_file_readable_by_others_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "audit.key"
    write_new_key(key)
    key.chmod(0o644)
    code = main(["quota", "set", "--file", str(tmp_path / "q.json"), "--tenant", "acme",
                 "--requests", "10", "--audit-trail", str(tmp_path / "audit.jsonl"),
                 "--audit-key-file", str(key)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "must not be readable by others" in err
    assert key.read_text().strip() not in err


def test_an_append_that_fails_after_the_change_fails_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.audit.admin import ChangeRecorder

    trail = AuditTrail(tmp_path / "audit.jsonl")
    recorder = ChangeRecorder(trail)
    recorder.preflight()  # an empty trail can take entries
    recorder.append("cli:a", "quota.set", "quotas/tenant:acme", None, {"requests": 1})
    with trail.path.open("ab") as handle:  # damaged between two changes of one command
        handle.write(b"{")
    recorder.append("cli:a", "quota.set", "quotas/tenant:acme", {"requests": 1}, None)
    assert (recorder.recorded, len(recorder.failures)) == (1, 1)
    assert recorder.finish(0) == 1
    err = capsys.readouterr().err
    assert "the change was made but NOT recorded" in err and "quota.set" in err
