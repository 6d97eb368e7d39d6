"""The frame cap before authentication (decision 0024) relies on this: once a SASL
session succeeded, ``Authentication.authenticated`` stays true through KIP-368
re-authentication, so the full ``max_request_bytes`` keeps applying while a
connection re-authenticates."""

from __future__ import annotations

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.credentials import CredentialStore
from gateway.identity import ClientIdentity
from gateway.sasl.connection import Authentication

from .conftest import sasl_server


async def _exchange(auth: Authentication, token: bytes) -> SaslAuthenticateResponse:
    _, refused = auth.handshake(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert refused is None
    pending = auth.begin(SaslAuthenticateRequest(auth_bytes=token), 2, 1)
    assert pending is not None
    step = await pending.mechanism.step(pending.auth_bytes)
    response: SaslAuthenticateResponse = auth.finish(pending, step, SaslAuthenticateResponse)
    return response


async def test_authenticated_holds_from_the_first_success_through_reauthentication(
    file_store: CredentialStore,
) -> None:
    key, secret = await file_store.create_api_key(principal="User:t.app", tenant="t", actor="t")
    server = sasl_server(file_store, "PLAIN")
    auth = Authentication(server, ClientIdentity("tenants", "127.0.0.1", 50000), 3600)
    assert not auth.authenticated  # the small cap applies
    assert (await _exchange(auth, f"\0{key.key_id}\0wrong".encode())).error_code != 0
    assert not auth.authenticated
    assert (await _exchange(auth, f"\0{key.key_id}\0{secret}".encode())).error_code == 0
    assert auth.authenticated
    auth.handshake(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert auth.authenticated  # a re-authentication under way keeps the full limit
    assert (await _exchange(auth, f"\0{key.key_id}\0{secret}".encode())).error_code == 0
    assert auth.authenticated
    await server.close()
