"""SCRAM-SHA-256/512 against a client written here from RFC 5802, the RFC 7677
test vector, and kafka-python's own SCRAM client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

import pytest
from kafka.net.sasl.scram import SaslMechanismScram

from gateway.credentials import CredentialStore, ScramCredential
from gateway.credentials.hashing import scram_keys
from gateway.sasl import AUTH_FAILED, Step
from gateway.sasl.scram import ScramMechanism

from .conftest import sasl_server

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


class RfcClient:
    """The client side of RFC 5802, independent of the gateway's code."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user = user.replace("=", "=3D").replace(",", "=2C")
        self.password = password.encode()
        self.nonce = nonce or secrets.token_urlsafe(18)
        self.gs2 = "n,,"
        self.server_signature = b""

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return (self.gs2 + self.bare).encode()

    def final(self, server_first: bytes, *, tamper_nonce: bool = False) -> bytes:
        text = server_first.decode()
        fields = dict(part.split("=", 1) for part in text.split(","))
        assert fields["r"].startswith(self.nonce) and len(fields["r"]) > len(self.nonce)
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash, client_key).digest()
        nonce = fields["r"] + ("x" if tamper_nonce else "")
        cbind = base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={cbind},r={nonce}"
        auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self.server_signature = self._hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        text = server_final.decode()
        return text.startswith("v=") and base64.b64decode(text[2:]) == self.server_signature

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash).digest()


async def exchange(
    store: CredentialStore, mechanism: str, user: str, password: str
) -> tuple[RfcClient, Step, Step]:
    server = sasl_server(store, mechanism)
    client = RfcClient(mechanism, user, password)
    scram = server.start(mechanism, "10.0.0.1")
    first = await scram.step(client.first())
    assert not first.done and first.challenge is not None, first
    final = await scram.step(client.final(first.challenge))
    await server.close()
    return client, first, final


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_good_password_and_server_signature(store: CredentialStore, mechanism: str) -> None:
    await store.put_scram("alice", mechanism, "s3cret-pw", iterations=4096, actor="t", tenant="t1")
    client, first, final = await exchange(store, mechanism, "alice", "s3cret-pw")
    assert first.claimed == "alice"
    assert final.succeeded and final.principal == "User:alice" and final.tenant == "t1"
    assert final.challenge is not None and client.verify(final.challenge)
    assert final.api_key_id is None


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_wrong_password_and_unknown_user_look_alike(
    file_store: CredentialStore, mechanism: str
) -> None:
    await file_store.put_scram("alice", mechanism, "right", iterations=4096, actor="t")
    _, real_first, wrong = await exchange(file_store, mechanism, "alice", "wrong")
    _, fake_first, unknown = await exchange(file_store, mechanism, "mallory", "whatever")
    _, fake_again, _ = await exchange(file_store, mechanism, "mallory", "whatever")
    for step in (wrong, unknown):
        assert step.done and step.principal is None and step.challenge is None
        assert step.error == AUTH_FAILED
    assert (wrong.reason, unknown.reason) == ("wrong_secret", "unknown_user")

    def salt_and_iterations(step: Step) -> tuple[str, str]:
        assert step.challenge is not None
        fields = dict(p.split("=", 1) for p in step.challenge.decode().split(","))
        return fields["s"], fields["i"]

    real_salt, real_iterations = salt_and_iterations(real_first)
    fake_salt, fake_iterations = salt_and_iterations(fake_first)
    assert len(base64.b64decode(fake_salt)) == len(base64.b64decode(real_salt))
    assert fake_iterations == real_iterations == "4096"
    assert salt_and_iterations(fake_again) == (fake_salt, fake_iterations)  # deterministic


async def test_rfc7677_test_vector(file_store: CredentialStore) -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    stored_key, server_key = scram_keys("SCRAM-SHA-256", "pencil", salt, 4096)
    credential = ScramCredential("user", "SCRAM-SHA-256", salt, 4096, stored_key, server_key)
    await file_store.backend.put("SCRAM-SHA-256", "user", credential.to_record())
    server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    scram = ScramMechanism("SCRAM-SHA-256", file_store, 4096, nonce=lambda: server_nonce)
    first = await scram.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first.challenge == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = await scram.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final.succeeded
    assert final.challenge == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_kafka_python_client_authenticates(
    file_store: CredentialStore, mechanism: str
) -> None:
    await file_store.put_scram("app", mechanism, "pässword", iterations=8192, actor="t")
    server = sasl_server(file_store, mechanism)
    client = SaslMechanismScram(
        sasl_plain_username="app", sasl_plain_password="pässword", sasl_mechanism=mechanism
    )
    scram = server.start(mechanism, "10.0.0.1")
    first = await scram.step(client.auth_bytes())
    client.receive(first.challenge)
    final = await scram.step(client.auth_bytes())
    assert final.succeeded and final.principal == "User:app"
    client.receive(final.challenge)  # raises if the server signature is wrong
    assert client.is_authenticated()
    await server.close()


async def test_user_names_with_escapes(file_store: CredentialStore) -> None:
    await file_store.put_scram("a,b=c", "SCRAM-SHA-256", "pw", iterations=4096, actor="t")
    _, _, final = await exchange(file_store, "SCRAM-SHA-256", "a,b=c", "pw")
    assert final.succeeded and final.principal == "User:a,b=c"


async def test_nonce_must_be_the_combined_one(file_store: CredentialStore) -> None:
    await file_store.put_scram("alice", "SCRAM-SHA-256", "pw", iterations=4096, actor="t")
    server = sasl_server(file_store, "SCRAM-SHA-256")
    client = RfcClient("SCRAM-SHA-256", "alice", "pw")
    scram = server.start("SCRAM-SHA-256", "h")
    first = await scram.step(client.first())
    assert first.challenge is not None
    final = await scram.step(client.final(first.challenge, tamper_nonce=True))
    assert final.done and final.principal is None and final.reason == "nonce_mismatch"
    await server.close()


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"p=tls-unique,,n=alice,r=abc", "channel_binding"),
        (b"n,,n=alice,r=abc,tokenauth=true", "tokenauth"),
        (b"n,a=bob,n=alice,r=abc", "authzid_mismatch"),
        (b"n,,m=ext,n=alice,r=abc", "scram_first"),
        (b"x,,n=alice,r=abc", "scram_gs2_header"),
        (b"n,,n=al=ice,r=abc", "scram_first"),
        (b"n,,n=alice,r=a,bc", "scram_extension"),
        (b"n,,n=alice", "scram_first"),
        (b"n,,n=alice,r=", "scram_first"),
        (b"n,,n=\xff,r=abc", "scram_encoding"),
        (b"garbage", "scram_first"),
        (b"n,,n=alice,r=" + b"a" * 5000, "scram_encoding"),
    ],
)
async def test_bad_client_first_messages(
    file_store: CredentialStore, message: bytes, reason: str
) -> None:
    scram = ScramMechanism("SCRAM-SHA-256", file_store, 4096)
    step = await scram.step(message)
    assert step.done and step.principal is None and step.challenge is None
    assert step.reason == reason
    assert step.error is not None and step.error.startswith("Authentication failed")


async def test_authzid_equal_to_the_user_is_accepted(file_store: CredentialStore) -> None:
    scram = ScramMechanism("SCRAM-SHA-256", file_store, 4096)
    step = await scram.step(b"n,a=alice,n=alice,r=abc")
    assert not step.done and step.challenge is not None


@pytest.mark.parametrize(
    "final",
    [
        b"c=biws,r=NONCE",  # no proof
        b"c=eSws,r=NONCE,p=AAAA",  # channel binding says y,, but the header was n,,
        b"c=biws,r=NONCE,p=not*base64",
        b"c=biws,r=NONCE,p=AAAA",  # proof of the wrong length
        b"r=NONCE,c=biws,p=AAAA",
        b"\xff",
    ],
)
async def test_bad_client_final_messages(file_store: CredentialStore, final: bytes) -> None:
    await file_store.put_scram("alice", "SCRAM-SHA-256", "pw", iterations=4096, actor="t")
    scram = ScramMechanism("SCRAM-SHA-256", file_store, 4096, nonce=lambda: "srv")
    first = await scram.step(b"n,,n=alice,r=cli")
    assert first.challenge is not None and first.challenge.startswith(b"r=clisrv,")
    step = await scram.step(final.replace(b"NONCE", b"clisrv"))
    assert step.done and step.principal is None and step.challenge is None
    assert step.error is not None and step.reason is not None


async def test_removed_user_cannot_start_again(store: CredentialStore) -> None:
    await store.put_scram("alice", "SCRAM-SHA-512", "pw", iterations=4096, actor="t")
    assert (await exchange(store, "SCRAM-SHA-512", "alice", "pw"))[2].succeeded
    await store.remove_scram("alice", ["SCRAM-SHA-512"], actor="t")
    assert (await exchange(store, "SCRAM-SHA-512", "alice", "pw"))[2].reason == "unknown_user"
