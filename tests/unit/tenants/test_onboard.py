from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from gateway.authz.engine import Authorizer
from gateway.authz.model import Operation, ResourceType
from gateway.config import GatewayConfig, load_config
from gateway.credentials.hashing import verify_secret
from gateway.tenants import onboard
from gateway.tenants.model import TenantError

from .conftest import stores_for, write_config


def _allowed(config: GatewayConfig, principal: str, rtype: ResourceType, name: str,
             op: Operation) -> bool:  # fmt: skip
    assert config.authorization is not None
    authorizer = Authorizer.from_config(config.authorization)
    return authorizer.authorize(principal, "127.0.0.1", rtype, name, op).allowed


async def test_create_sets_up_every_store_and_the_bundle(
    config: GatewayConfig, tmp_path: Path
) -> None:
    stores = stores_for(config)
    out = tmp_path / "bundle"
    created = await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=out)
    tenant = created.tenant
    assert tenant.prefix == "acme." and tenant.state == "active"
    assert (await stores.tenants.get("acme")) == tenant
    key = await stores.credentials.api_key(created.key_id)
    assert key is not None and key.tenant == "acme" and key.principal == "User:acme.app"
    assert verify_secret(created.secret.encode(), key.secret_hash)
    assert stores.quotas.load().assignments["acme"] == "bronze"
    p = "User:acme.app"
    assert _allowed(config, p, ResourceType.TOPIC, "acme.orders", Operation.CREATE)
    assert _allowed(config, p, ResourceType.GROUP, "acme.g", Operation.READ)
    assert _allowed(config, p, ResourceType.TRANSACTIONAL_ID, "acme.tx", Operation.WRITE)
    assert not _allowed(config, p, ResourceType.TOPIC, "globex.orders", Operation.READ)
    assert not _allowed(config, p, ResourceType.TOPIC, "acme", Operation.READ)
    assert not _allowed(config, p, ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER)
    props = (out / "client.properties").read_text()
    assert "bootstrap.servers=kafka.example.com:9093" in props  # the SASL listener, advertised
    assert created.secret in props
    assert stat.S_IMODE((out / "client.properties").stat().st_mode) == 0o600
    assert json.loads((out / "bundle.json").read_text())["api_key"] == created.key_id


async def test_create_twice_is_refused_without_changes(config: GatewayConfig) -> None:
    stores = stores_for(config)
    await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=None)
    rules = stores.policies.list()
    with pytest.raises(TenantError, match="exists"):
        await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=None)
    assert stores.policies.list() == rules
    assert len(await stores.credentials.list_api_keys()) == 1


async def test_unknown_plan_and_overlap_are_refused(config: GatewayConfig) -> None:
    stores = stores_for(config)
    with pytest.raises(TenantError, match="no plan 'gold'"):
        await onboard.create(stores, "acme", "gold", actor="test", bundle_dir=None)
    assert stores.policies.list() == []


async def test_a_failing_step_is_rolled_back(config: GatewayConfig, tmp_path: Path) -> None:
    stores = stores_for(config)
    out = tmp_path / "bundle"

    async def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    stores.tenants.put = broken  # type: ignore[method-assign]  # the last step fails
    with pytest.raises(TenantError, match="undone"):
        await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=out)
    assert stores.policies.list() == [] and stores.policies.memberships() == []
    assert "acme" not in stores.quotas.load().assignments
    assert [k.state for k in await stores.credentials.list_api_keys()] == ["revoked"]
    assert not out.exists()


async def test_suspend_and_resume(config: GatewayConfig) -> None:
    stores = stores_for(config)
    await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=None)
    assert (await onboard.set_state(stores, "acme", "suspended", actor="t")).blocked
    assert (await onboard.set_state(stores, "acme", "suspended", actor="t")).blocked  # idempotent
    assert not (await onboard.set_state(stores, "acme", "active", actor="t")).blocked
    with pytest.raises(TenantError, match="no tenant"):
        await onboard.set_state(stores, "nobody", "suspended", actor="t")


async def test_delete_without_the_cluster_deletes_and_says_what_it_could_not_list(
    config: GatewayConfig,
) -> None:
    """The cluster (127.0.0.1:1 here) is only needed to say which topics are kept."""
    stores = stores_for(config)
    await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=None)
    report = await onboard.delete(stores, "acme", actor="t", delete_data=False)
    assert report.tenant.state == "deleted" and report.revoked_keys
    assert report.topics_unlisted is not None and "cannot be reached" in report.topics_unlisted
    assert (await stores.tenants.get("acme")).state == "deleted"  # type: ignore[union-attr]


async def test_delete_with_data_and_no_cluster_changes_nothing(config: GatewayConfig) -> None:
    stores = stores_for(config)
    await onboard.create(stores, "acme", "bronze", actor="test", bundle_dir=None)
    keys_before = await stores.credentials.list_api_keys()
    with pytest.raises(TenantError, match="cannot be reached"):
        await onboard.delete(stores, "acme", actor="t", delete_data=True)
    assert (await stores.tenants.get("acme")).state == "active"  # type: ignore[union-attr]
    assert await stores.credentials.list_api_keys() == keys_before


async def test_transparent_names_need_the_namespaces_section(
    config: GatewayConfig, tmp_path: Path
) -> None:
    stores = stores_for(config)  # the configuration has no namespaces: section
    with pytest.raises(TenantError, match="namespaces: section"):
        await onboard.create(
            stores, "acme", "bronze", actor="t", bundle_dir=None, names="transparent"
        )
    assert await stores.tenants.get("acme") is None
    await onboard.create(stores, "acme", "bronze", actor="t", bundle_dir=None)
    with pytest.raises(TenantError, match="namespaces: section"):
        await onboard.set_names(stores, "acme", "transparent", actor="t")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    covered = load_config(write_config(elsewhere, namespaces={"listeners": ["plain"]}))
    with pytest.raises(TenantError, match="leaves out listener 'tenants'"):
        await onboard.create(
            stores_for(covered), "beta", "bronze", actor="t", bundle_dir=None,
            names="transparent",
        )  # fmt: skip


def test_cli_create_prints_the_secret_once_and_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    path = write_config(tmp_path)
    out = tmp_path / "b"
    code = main(["tenant", "create", "acme", "--plan", "bronze", "--config", str(path),
                 "--bundle-dir", str(out), "--json"])  # fmt: skip
    assert code == 0
    created = json.loads(capsys.readouterr().out)
    assert created["secret"] in (out / "confluent-kafka.json").read_text()
    assert main(["tenant", "list", "--config", str(path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in listed] == ["acme"]
    assert created["secret"] not in json.dumps(listed)
    assert main(["tenant", "suspend", "acme", "--config", str(path)]) == 0
    assert main(["tenant", "show", "acme", "--config", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert shown["state"] == "suspended" and created["secret"] not in json.dumps(shown)
    assert main(["tenant", "create", "acme", "--plan", "bronze", "--config", str(path)]) == 1
    assert asyncio.run(stores_for(load_config(path)).tenants.get("acme")) is not None


def test_cli_changes_go_to_the_audit_trail_without_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    path = write_config(tmp_path)
    trail = tmp_path / "audit.jsonl"
    common = ["--config", str(path), "--audit-trail", str(trail), "--actor", "cli:test"]
    assert main(["tenant", "create", "acme", "--plan", "bronze", "--json", *common]) == 0
    secret = json.loads(capsys.readouterr().out)["secret"]
    assert main(["tenant", "suspend", "acme", *common]) == 0
    entries = [json.loads(line) for line in trail.read_text().splitlines()]
    actions = [e["action"] for e in entries]
    assert {"tenant.create", "apikey.create", "policy.add", "tenant.suspend"} <= set(actions)
    assert any(a.startswith("plan.") for a in actions)
    assert all(e["actor"] == "cli:test" for e in entries)
    assert secret not in trail.read_text()
