"""``kgw apikey`` and ``kgw scram``: the secret is printed once and never again; SCRAM
passwords come from a prompt or stdin, never argv."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.credentials import CredentialStoreConfig, open_store
from gateway.credentials.file_backend import FileBackend
from gateway.credentials.store import CredentialStore
from gateway.sasl import SaslServer
from tests.redis_server import RedisServer


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def gateway_yaml(tmp_path: Path, store: dict[str, str]) -> Path:
    path = tmp_path / "gw.yaml"
    config = {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [
            {
                "name": "p",
                "bootstrap_port": 19092,
                "broker_port_base": 19100,
                "advertised_host": "h",
            }
        ],
        "sasl": {"mechanisms": ["PLAIN", "SCRAM-SHA-256"], "credential_store": store},
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_apikey_secret_is_shown_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = str(tmp_path / "creds.json")
    code, out, err = run(
        capsys, "apikey", "create", "--store-file", store, "--tenant", "acme",
        "--principal", "User:acme.billing", "--description", "billing app",
    )  # fmt: skip
    assert code == 0
    fields = dict(line.split(":", 1) for line in out.splitlines())
    key_id, secret = fields["key_id"].strip(), fields["secret"].strip()
    assert key_id.startswith("ak_") and secret.startswith("sk_")
    assert "shown only now" in err

    for argv in (("apikey", "list"), ("apikey", "list", "--json")):
        code, listing, _ = run(capsys, *argv, "--store-file", store)
        assert code == 0 and key_id in listing and secret not in listing
        assert "scrypt$" not in listing
    assert secret not in Path(store).read_text()

    async def authenticate() -> bool:
        server = SaslServer(["PLAIN"], store=open_store(CredentialStoreConfig(file=Path(store))))
        step = await server.start("PLAIN", "h").step(f"\0{key_id}\0{secret}".encode())
        await server.close()
        return step.succeeded

    assert asyncio.run(authenticate())
    code, out, _ = run(capsys, "apikey", "revoke", key_id, "--store-file", store)
    assert code == 0 and "revoked" in out
    assert not asyncio.run(authenticate())
    code, listing, _ = run(capsys, "apikey", "list", "--store-file", store, "--json")
    assert json.loads(listing)[0]["state"] == "revoked"
    code, _, err = run(capsys, "apikey", "revoke", "ak_nope", "--store-file", store)
    assert code == 1 and "no API key" in err


def test_apikey_json_and_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = gateway_yaml(tmp_path, {"file": str(tmp_path / "c.json")})
    code, out, _ = run(
        capsys, "apikey", "create", "--config", str(config), "--tenant", "t",
        "--principal", "User:t.x", "--json", "--expires-days", "30", "--actor", "User:ops",
    )  # fmt: skip
    created = json.loads(out)
    assert code == 0 and created["secret"].startswith("sk_") and created["expires_at"]
    code, out, _ = run(capsys, "apikey", "list", "--config", str(config), "--tenant", "other")
    assert code == 0 and "0 key(s)" in out


def test_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "apikey", "list")
    assert code == 2 and "--config" in err
    code, _, err = run(
        capsys, "apikey", "create", "--store-file", str(tmp_path / "c"), "--tenant", "t",
        "--principal", "nouser",
    )  # fmt: skip
    assert code == 1 and "User:" in err
    no_sasl = tmp_path / "nosasl.yaml"
    no_sasl.write_text(gateway_yaml(tmp_path, {"file": "x"}).read_text().replace('"sasl"', '"x"'))
    code, _, err = run(capsys, "apikey", "list", "--config", str(no_sasl))
    assert code == 2
    with pytest.raises(SystemExit) as exit_info:  # there is no way to pass a password in argv
        main(["scram", "add", "u", "--mechanism", "SCRAM-SHA-256", "--password", "pw"])
    assert exit_info.value.code == 2


def test_scram_add_list_remove(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer
) -> None:
    where = ("--redis-url", redis_server.url)
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse\n"))
    code, out, _ = run(capsys, "scram", "add", "alice", "--mechanism", "SCRAM-SHA-512", *where)
    assert code == 0 and "8192 iterations" in out and "correct horse" not in out
    monkeypatch.setattr("sys.stdin", io.StringIO("other pw\n"))
    code, out, _ = run(
        capsys, "scram", "add", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096",
        "--tenant", "acme", *where,
    )  # fmt: skip
    assert code == 0
    code, out, _ = run(capsys, "scram", "list", *where)
    assert "SCRAM-SHA-256  4096" in out and "SCRAM-SHA-512  8192" in out
    code, out, _ = run(capsys, "scram", "list", "--json", *where)
    assert {c["mechanism"] for c in json.loads(out)} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert "stored_key" not in out and "salt" not in out

    async def stored() -> list[str]:
        store = open_store(CredentialStoreConfig(redis_url=redis_server.url))
        found = [c.mechanism for c in await store.list_scram()]
        await store.close()
        return found

    assert sorted(asyncio.run(stored())) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    code, out, _ = run(capsys, "scram", "remove", "alice", "--mechanism", "SCRAM-SHA-512", *where)
    assert code == 0 and asyncio.run(stored()) == ["SCRAM-SHA-256"]
    code, out, _ = run(capsys, "scram", "remove", "alice", *where)
    assert code == 0
    code, _, err = run(capsys, "scram", "remove", "alice", *where)
    assert code == 1 and "no SCRAM credential" in err


def test_scram_refusals(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    where = ("--store-file", str(tmp_path / "c.json"))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    code, _, err = run(capsys, "scram", "add", "bob", "--mechanism", "SCRAM-SHA-256", *where)
    assert code == 1 and "empty" in err
    code, _, err = run(
        capsys, "scram", "add", "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "100", *where
    )
    assert code == 2 and "4096" in err


def test_scram_iterations_default_from_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = gateway_yaml(tmp_path, {"file": str(tmp_path / "c.json")})
    text = json.loads(config.read_text())
    text["sasl"]["scram_iterations"] = 12000
    config.write_text(json.dumps(text))
    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    code, out, _ = run(
        capsys, "scram", "add", "carol", "--mechanism", "SCRAM-SHA-256", "--config", str(config)
    )
    assert code == 0 and "12000 iterations" in out
    store = CredentialStore(FileBackend(tmp_path / "c.json"))
    credential = asyncio.run(store.scram("SCRAM-SHA-256", "carol"))
    assert credential is not None and credential.iterations == 12000


def test_apikey_create_checks_the_tenant(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A key for a deleted tenant is refused; one for a tenant the store does not know,
    or named for another tenant, is made with a warning."""
    from gateway.tenants.model import Tenant
    from gateway.tenants.store import open_tenant_store

    store = tmp_path / "creds.json"
    tenants = open_tenant_store(CredentialStoreConfig(file=store))

    async def put() -> None:
        await tenants.put(Tenant("gone", "p", "gone.", "deleted"), actor="t", action="x")
        await tenants.put(Tenant("initech", "p", "initech."), actor="t", action="x")
        await tenants.close()

    asyncio.run(put())
    base = ("apikey", "create", "--store-file", str(store))
    code, out, err = run(capsys, *base, "--tenant", "gone", "--principal", "User:gone.app")
    assert code == 1 and "is deleted" in err and "secret" not in out
    code, _, err = run(capsys, *base, "--tenant", "acme", "--principal", "User:initech.app")
    assert code == 0
    assert "no tenant 'acme'" in err and "named for tenant 'initech'" in err
    code, _, err = run(capsys, *base, "--tenant", "initech", "--principal", "User:initech.app")
    assert code == 0 and "no tenant" not in err and "named for" not in err
