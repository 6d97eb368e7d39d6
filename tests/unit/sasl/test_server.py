"""SaslServer: enabled mechanisms, start, revalidation for re-authentication."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.credentials import CredentialStore, CredentialStoreConfig, open_store
from gateway.sasl import SaslConfig, SaslServer
from gateway.sasl.plain import PlainMechanism
from gateway.sasl.scram import ScramMechanism
from tests.redis_server import free_port

from .conftest import sasl_server


async def test_mechanisms_in_config_order_and_start(tmp_path: Path) -> None:
    config = SaslConfig.model_validate(
        {
            "mechanisms": ["SCRAM-SHA-512", "PLAIN"],
            "credential_store": {"file": str(tmp_path / "c.json")},
            "scram_iterations": 4096,
            "session_lifetime_s": 900,
            "failure_limiter": {"max_failures": 2},
        }
    )
    server = SaslServer.from_config(config)
    assert server.mechanisms() == ["SCRAM-SHA-512", "PLAIN"]
    assert isinstance(server.start("PLAIN", "10.0.0.1"), PlainMechanism)
    scram = server.start("SCRAM-SHA-512", "10.0.0.1")
    assert isinstance(scram, ScramMechanism) and scram.name == "SCRAM-SHA-512"
    with pytest.raises(KeyError):
        server.start("SCRAM-SHA-256", "10.0.0.1")
    with pytest.raises(KeyError):
        server.start("GSSAPI", "10.0.0.1")
    assert server.session_lifetime_ms == 900_000
    assert server.auth_timeout_s == 10.0
    assert server.limiter.max_failures == 2
    await server.close()


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="unknown"):
        SaslServer(["OAUTHBEARER"])
    with pytest.raises(ValueError, match="credential store"):
        SaslServer(["PLAIN"])
    with pytest.raises(ValueError, match="Kerberos"):
        SaslServer(["GSSAPI"])


async def test_is_still_valid_follows_revocation(store: CredentialStore) -> None:
    server = sasl_server(store)
    key, _ = await store.create_api_key(principal="User:t.app", tenant="t", actor="a")
    assert await server.is_still_valid("User:t.app", key.key_id, "PLAIN")
    assert not await server.is_still_valid("User:someone-else", key.key_id, "PLAIN")
    assert not await server.is_still_valid("User:t.app", "ak_unknown", "PLAIN")
    await store.revoke_api_key(key.key_id, actor="a")
    assert not await server.is_still_valid("User:t.app", key.key_id, "PLAIN")

    await store.put_scram("alice", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
    assert await server.is_still_valid("User:alice", None, "SCRAM-SHA-256")
    assert not await server.is_still_valid("User:alice", None, "SCRAM-SHA-512")
    assert await server.is_still_valid("User:alice", None)  # some SCRAM credential exists
    await store.remove_scram("alice", actor="a")
    assert not await server.is_still_valid("User:alice", None, "SCRAM-SHA-256")
    assert not await server.is_still_valid("User:alice", None)
    assert not await server.is_still_valid("User:alice", None, "GSSAPI")  # not enabled
    await server.close()


async def test_store_outage(caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(CredentialStoreConfig(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    server = sasl_server(store, "PLAIN", "SCRAM-SHA-256")
    step = await server.start("PLAIN", "10.0.0.1").step(b"\0ak_x\0sk_y")
    assert step.done and step.principal is None and step.reason == "store_unavailable"
    step = await server.start("SCRAM-SHA-256", "10.0.0.1").step(b"n,,n=alice,r=abc")
    assert step.done and step.principal is None and step.reason == "store_unavailable"
    with caplog.at_level(logging.WARNING, logger="kgw.sasl"):
        # established sessions are kept; the session lifetime still bounds them
        assert await server.is_still_valid("User:a", "ak_x", "PLAIN")
    assert any(r.event == "sasl_revalidation_skipped" for r in caplog.records)  # type: ignore[attr-defined]
    await server.close()
