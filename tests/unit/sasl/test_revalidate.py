"""Revalidating live SASL sessions: what a session is checked by, and the store's answers."""

from __future__ import annotations

import logging

import pytest

from gateway.credentials import CredentialStore, StoreError
from gateway.identity import ClientIdentity
from gateway.sasl import SaslServer
from gateway.sasl.connection import Authentication
from gateway.sasl.revalidate import Revalidation, session_key

from .conftest import sasl_server


def _login(
    server: SaslServer, principal: str, mechanism: str, key_id: str | None = None, cert: str = ""
) -> tuple[ClientIdentity, Authentication]:
    """A connection's identity and SASL state after a successful login."""
    identity = ClientIdentity("tenants", "127.0.0.1", 50000, cert_subject=cert or None)
    auth = Authentication(server, identity, 3600, keep_certificate_principal=bool(cert))
    auth.authenticated, auth.principal = True, principal
    identity.principal = f"User:{cert}" if cert else principal
    identity.sasl_mechanism, identity.api_key_id = mechanism, key_id
    return identity, auth


async def test_sessions_are_keyed_by_their_sasl_login(store: CredentialStore) -> None:
    server = sasl_server(store)
    plain = _login(server, "User:t.app", "PLAIN", "ak_1")
    assert session_key(*plain) == ("User:t.app", "ak_1", "PLAIN")
    # The connection's principal comes from its certificate; the key from the SASL login.
    certified = _login(server, "User:alice", "SCRAM-SHA-256", cert="CN=alice-laptop")
    assert certified[0].principal == "User:CN=alice-laptop"
    assert session_key(*certified) == ("User:alice", None, "SCRAM-SHA-256")
    assert session_key(*_login(server, "User:bob", "GSSAPI")) is None  # bounded by its ticket
    identity, auth = _login(server, "User:t.app", "PLAIN", "ak_1")
    auth.authenticated = False
    assert session_key(identity, auth) is None
    assert session_key(identity, None) is None


async def test_revoked_keys_and_removed_users_are_invalid(store: CredentialStore) -> None:
    server = sasl_server(store)
    kept, _ = await store.create_api_key(principal="User:t.app", tenant="t", actor="a")
    revoked, _ = await store.create_api_key(principal="User:t.app", tenant="t", actor="a")
    await store.put_scram("alice", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
    await store.put_scram("carol", "SCRAM-SHA-256", "pw", iterations=4096, actor="a")
    keys = [
        ("User:t.app", kept.key_id, "PLAIN"),
        ("User:t.app", revoked.key_id, "PLAIN"),
        ("User:alice", None, "SCRAM-SHA-256"),
        ("User:carol", None, "SCRAM-SHA-256"),
    ]
    revalidation = Revalidation(server)
    assert await revalidation.invalid(keys) == []
    await store.revoke_api_key(revoked.key_id, actor="a")
    await store.remove_scram("carol", actor="a")
    assert await revalidation.invalid(keys) == [keys[1], keys[3]]


class _DownServer:
    """A SASL server whose store cannot answer until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.asked = 0

    async def still_valid(self, principal: str, api_key_id: str | None, mechanism: str) -> bool:
        self.asked += 1
        if not self.up:
            raise StoreError("redis: connection refused")
        return False


async def test_an_unreachable_store_keeps_every_session_and_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = _DownServer()
    revalidation = Revalidation(server)  # type: ignore[arg-type]
    keys = [("User:a", "ak_1", "PLAIN"), ("User:b", "ak_2", "PLAIN")]
    with caplog.at_level(logging.INFO, logger="kgw.sasl"):
        assert await revalidation.invalid(keys) == []
        assert await revalidation.invalid(keys) == []
        assert server.asked == 2  # each sweep stops at the first failure
        server.up = True
        assert await revalidation.invalid(keys) == keys
    events = [getattr(r, "event", None) for r in caplog.records]
    assert events == ["sasl_revalidation_skipped", "sasl_revalidation_resumed"]
    assert "connection refused" not in caplog.text  # the exception's text may name hosts
