"""Per-tenant upstream credentials: derivation, generations, the secret file, provisioning."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from gateway.upstream.provision import ProvisionError, TenantIdentities
from gateway.upstream.settings import TenantIdentitiesConfig
from gateway.upstream.tenant_identity import (
    TenantSecret,
    TenantSecretError,
    derive_password,
    generation,
    read_secret,
    tenant_of_upstream,
    upstream_principal,
)

SECRET = b"s" * 40


def _config(tmp_path: Path, **more: Any) -> TenantIdentitiesConfig:
    return TenantIdentitiesConfig(secret_file=tmp_path / "secret", **more)


def test_names() -> None:
    assert upstream_principal("acme") == "User:kgw-t-acme"
    assert tenant_of_upstream("User:kgw-t-acme") == "acme"
    assert tenant_of_upstream("User:acme.app") is None
    assert tenant_of_upstream("User:kgw-t-") is None


def test_passwords_differ_by_tenant_generation_and_secret() -> None:
    one = derive_password(SECRET, "a", 1)
    assert one == derive_password(SECRET, "a", 1)  # every instance computes the same
    assert len({one, derive_password(SECRET, "b", 1), derive_password(SECRET, "a", 2),
                derive_password(b"t" * 40, "a", 1)}) == 4  # fmt: skip
    assert SECRET.decode() not in one


def test_generation_boundaries() -> None:
    assert generation(0, 3600) == 0
    assert generation(3599.9, 3600) == 0
    assert generation(3600, 3600) == 1


def test_credential_and_upsertion_hide_the_password(tmp_path: Path) -> None:
    secret = TenantSecret(_config(tmp_path), SECRET)
    cred = secret.credential("acme", 7)
    assert cred.username == "kgw-t-acme" and cred.generation == 7
    assert cred.password not in repr(cred) and "s" * 40 not in repr(secret)
    up = cred.upsertion()
    expected = hashlib.pbkdf2_hmac("sha512", cred.password.encode(), cred.salt, 4096)
    assert up.salted_password == expected and int(up.mechanism) == 2 and up.name == "kgw-t-acme"


def test_secret_file_rules(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("x" * 40 + "\n")
    path.chmod(0o600)
    assert read_secret(path) == b"x" * 40
    path.chmod(0o644)
    with pytest.raises(TenantSecretError, match="readable by others"):
        read_secret(path)
    path.chmod(0o600)
    path.write_text("short\n")
    with pytest.raises(TenantSecretError, match="fewer than 32"):
        read_secret(path)
    with pytest.raises(TenantSecretError, match="cannot read"):
        read_secret(tmp_path / "missing")


class FakeBrokers:
    def __init__(self, error: ErrorCode = ErrorCode.none) -> None:
        self.requests: list[Any] = []
        self.error = error

    async def __call__(self, request: Any, response_type: type[Any]) -> Any:
        self.requests.append(request)
        user = request.upsertions[0].name
        result = AlterUserScramCredentialsResult(
            user=user, error_code=self.error, error_message=None
        )
        return AlterUserScramCredentialsResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)), results=(result,)
        )


def test_provisioned_once_per_generation_then_rotated(tmp_path: Path) -> None:
    now = [1000.0]
    brokers = FakeBrokers()
    ids = TenantIdentities(
        TenantSecret(_config(tmp_path, rotate_interval_s=100), SECRET), brokers, 5, lambda: now[0]
    )

    async def run() -> None:
        first = await ids.ensure("acme")
        assert (await ids.ensure("acme")) == first and len(brokers.requests) == 1
        assert await ids.rotate_due() == 0
        now[0] += 100
        assert await ids.rotate_due() == 1 and len(brokers.requests) == 2
        second = await ids.ensure("acme")
        assert second.generation == first.generation + 1 and second.password != first.password
        assert ids.rotations == 1
        await ids.ensure("acme", force=True)
        assert len(brokers.requests) == 3
        login = await ids.login("acme")
        assert login.username == "kgw-t-acme" and second.password not in repr(login)

    asyncio.run(run())


def test_a_refusal_is_an_error_without_the_secret(tmp_path: Path) -> None:
    ids = TenantIdentities(
        TenantSecret(_config(tmp_path), SECRET),
        FakeBrokers(ErrorCode.cluster_authorization_failed),
        5,
    )
    with pytest.raises(ProvisionError, match="cluster_authorization_failed") as refused:
        asyncio.run(ids.ensure("acme"))
    assert ids.current("acme").password not in str(refused.value)
    assert ids.provisioned == {}
