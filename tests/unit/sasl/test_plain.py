"""SASL/PLAIN with API keys, on both store backends."""

from __future__ import annotations

import time

import pytest

from gateway.credentials import CredentialStore
from gateway.sasl import AUTH_FAILED, SaslServer, Step

from .conftest import sasl_server


def plain(authcid: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{authcid}\0{password}".encode()


async def attempt(server: SaslServer, message: bytes) -> Step:
    mechanism = server.start("PLAIN", "10.0.0.1")
    assert mechanism.name == "PLAIN"
    return await mechanism.step(message)


async def test_good_key_authenticates_with_its_principal_and_tenant(
    store: CredentialStore,
) -> None:
    key, secret = await store.create_api_key(
        principal="User:acme.billing", tenant="acme", actor="test"
    )
    server = sasl_server(store)
    for authzid in ("", key.key_id):  # aiokafka sends authzid = username
        step = await attempt(server, plain(key.key_id, secret, authzid))
        assert step.succeeded and step.done
        assert step.challenge == b""
        assert step.principal == "User:acme.billing"
        assert step.api_key_id == key.key_id
        assert step.tenant == "acme"
        assert step.session_lifetime_ms is None
        assert step.error is None
    await server.close()


async def test_wrong_unknown_and_revoked_fail_alike(store: CredentialStore) -> None:
    key, secret = await store.create_api_key(principal="User:a.b", tenant="a", actor="test")
    server = sasl_server(store)
    wrong = await attempt(server, plain(key.key_id, secret + "x"))
    unknown = await attempt(server, plain("ak_doesnotexist", secret))
    await store.revoke_api_key(key.key_id, actor="test")
    revoked = await attempt(server, plain(key.key_id, secret))
    for step, reason in ((wrong, "wrong_secret"), (unknown, "unknown_user"), (revoked, "revoked")):
        assert step.done and not step.succeeded
        assert step.challenge is None and step.principal is None and step.api_key_id is None
        assert step.error == AUTH_FAILED  # one message: nothing tells whether the key exists
        assert step.reason == reason
    assert wrong.claimed == revoked.claimed == key.key_id
    assert unknown.claimed == "ak_doesnotexist"
    await server.close()


async def test_unknown_key_costs_as_much_as_a_wrong_secret(file_store: CredentialStore) -> None:
    key, _ = await file_store.create_api_key(principal="User:a", tenant="a", actor="t")
    server = sasl_server(file_store)
    durations = {}
    for name, message in (
        ("wrong", plain(key.key_id, "sk_wrong")),
        ("unknown", plain("ak_nope", "sk_wrong")),
    ):
        started = time.perf_counter()
        await attempt(server, message)
        durations[name] = time.perf_counter() - started
    # both run one scrypt verification; a skipped one would be ~1000x faster
    assert durations["unknown"] > durations["wrong"] / 4
    await server.close()


async def test_expired_key_fails_and_a_live_one_reports_its_lifetime(
    file_store: CredentialStore,
) -> None:
    live, live_secret = await file_store.create_api_key(
        principal="User:a", tenant="a", actor="t", expires_at=time.time() + 600
    )
    dead, dead_secret = await file_store.create_api_key(
        principal="User:a", tenant="a", actor="t", expires_at=time.time() - 1
    )
    server = sasl_server(file_store)
    ok = await attempt(server, plain(live.key_id, live_secret))
    assert ok.succeeded
    assert ok.session_lifetime_ms is not None and 590_000 < ok.session_lifetime_ms <= 600_000
    expired = await attempt(server, plain(dead.key_id, dead_secret))
    assert expired.error == AUTH_FAILED and expired.reason == "expired"
    await server.close()


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"only-one-field",
        b"\0user",
        b"\0user\0",  # empty password
        b"\0\0secret",  # empty username
        b"a\0b\0c\0d",  # too many fields
        b"\0us\xffer\0secret",  # not UTF-8
        b"\0user\0" + b"x" * 256,  # longer than RFC 4616 allows
    ],
)
async def test_malformed_messages_fail_cleanly(file_store: CredentialStore, message: bytes) -> None:
    server = sasl_server(file_store, "PLAIN")
    step = await attempt(server, message)
    assert step.done and step.error is not None and step.principal is None
    assert step.error.startswith("Authentication failed")
    await server.close()


async def test_authzid_must_be_empty_or_the_username(file_store: CredentialStore) -> None:
    key, secret = await file_store.create_api_key(principal="User:a", tenant="a", actor="t")
    server = sasl_server(file_store, "PLAIN")
    step = await attempt(server, plain(key.key_id, secret, authzid="someone-else"))
    assert step.done and step.principal is None and step.reason == "authzid_mismatch"
    await server.close()


async def test_a_mechanism_answers_once(file_store: CredentialStore) -> None:
    key, secret = await file_store.create_api_key(principal="User:a", tenant="a", actor="t")
    server = sasl_server(file_store, "PLAIN")
    mechanism = server.start("PLAIN", "10.0.0.1")
    assert (await mechanism.step(plain(key.key_id, secret))).succeeded
    again = await mechanism.step(plain(key.key_id, secret))
    assert again.done and again.error is not None and again.principal is None
    await server.close()
