"""Who a client connection is to the brokers with ``upstream.tenant_identities``:
super users keep the gateway's identity, tenants get theirs, anyone else is refused."""

from __future__ import annotations

import asyncio
import datetime
import shutil
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from gateway.config import parse_config
from gateway.identity import ClientIdentity
from gateway.runtime.gateway import Gateway
from gateway.runtime.upstream import UpstreamRefused
from gateway.upstream.identity import UpstreamIdentity
from gateway.upstream.provision import TenantLogin

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def _private(path: Path, text: str) -> Path:
    path.touch(mode=0o600)
    path.write_text(text + "\n")
    return path


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    policy = tmp_path / "policies"
    policy.mkdir()
    shutil.copy(POLICIES / "model.conf", policy / "model.conf")
    (policy / "policy.csv").write_text(
        "p, Role:tenant-acme, TOPIC, PREFIXED, acme., ALL, *, allow\n"
        "g, User:acme.app, Role:tenant-acme\n"
        "g, User:cert-acme, Role:tenant-acme\n"
    )
    config = parse_config({
        "upstream": {
            "bootstrap_servers": ["127.0.0.1:1"],
            "sasl": {"mechanism": "SCRAM-SHA-512", "username": "kgw",
                     "password_file": str(_private(tmp_path / "pw", "gateway-password"))},
            "tenant_identities": {"secret_file": str(_private(tmp_path / "s", "x" * 48))},
        },
        "listeners": [{"name": "l", "bootstrap_port": 9000, "broker_port_base": 9100,
                       "advertised_host": "127.0.0.1", "max_node_id": 10}],
        "authorization": {"policy_dir": str(policy), "super_users": ["User:ops"],
                          "gateway_checks": False},
    })  # fmt: skip
    gw = Gateway(config)
    assert gw.authorizer is None and gw.policy is not None  # no Enforcer: brokers decide
    assert gw.broker_enforcement is not None

    async def brokers(request: Any, _: type[Any]) -> Any:
        user = request.upsertions[0].name
        ok = AlterUserScramCredentialsResult(
            user=user, error_code=ErrorCode.none, error_message=None
        )
        zero = i32Timedelta.parse(datetime.timedelta(0))
        return AlterUserScramCredentialsResponse(throttle_time=zero, results=(ok,))

    gw.broker_enforcement.identities._admin = brokers
    return gw


def _who(principal: str, tenant: str | None = None) -> ClientIdentity:
    return ClientIdentity(listener="l", host="10.0.0.1", port=1, principal=principal, tenant=tenant)


def test_super_users_keep_the_gateways_identity(gateway: Gateway) -> None:
    login = asyncio.run(gateway.upstream_login(_who("User:ops")))
    assert isinstance(login, UpstreamIdentity) and login.username == "kgw"


def test_a_tenant_gets_its_own_principal(gateway: Gateway) -> None:
    login = asyncio.run(gateway.upstream_login(_who("User:acme.app", "acme")))
    assert isinstance(login, TenantLogin) and login.username == "kgw-t-acme"
    by_policy = asyncio.run(gateway.upstream_login(_who("User:cert-acme")))  # no SASL tenant
    assert isinstance(by_policy, TenantLogin) and by_policy.tenant == "acme"


def test_a_principal_of_no_tenant_is_refused(gateway: Gateway) -> None:
    with pytest.raises(UpstreamRefused, match="belongs to no tenant"):
        asyncio.run(gateway.upstream_login(_who("User:stranger")))


def test_the_desired_acls_follow_the_policy(gateway: Gateway) -> None:
    assert gateway.broker_enforcement is not None
    wanted = gateway.broker_enforcement.desired_acls()
    assert {(a.principal, a.name) for a in wanted} == {("User:kgw-t-acme", "acme.")}
