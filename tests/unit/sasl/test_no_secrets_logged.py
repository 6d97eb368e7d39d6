"""No secret and no SASL payload reaches a log line, a Step's error or reason, or the
audit hooks — on failures, successes and store outages alike."""

from __future__ import annotations

import base64
import logging

import pytest

from gateway.credentials import CredentialStore, CredentialStoreConfig, open_store
from gateway.sasl import Step
from tests.redis_server import free_port

from .conftest import sasl_server
from .test_scram import RfcClient

PASSWORD = "Hunter2-very-SECRET-pw"


def leaked(text: str, *secrets: str) -> list[str]:
    variants = []
    for secret in secrets:
        variants += [secret, base64.b64encode(secret.encode()).decode(), secret.encode().hex()]
    return [v for v in variants if v in text]


def step_text(steps: list[Step]) -> str:
    return " ".join(f"{s.error} {s.reason} {s.claimed}" for s in steps)


async def test_failures_log_no_secret(
    store: CredentialStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hooks: list[object] = []
    store.add_hook(lambda *change: hooks.append(change))
    key, secret = await store.create_api_key(principal="User:a", tenant="t", actor="a")
    await store.put_scram("alice", "SCRAM-SHA-256", PASSWORD, iterations=4096, actor="a")
    server = sasl_server(store, "PLAIN", "SCRAM-SHA-256")
    steps = []
    for message in (
        f"\0{key.key_id}\0{PASSWORD}".encode(),  # wrong secret
        f"\0ak_unknown\0{PASSWORD}".encode(),  # unknown key
        f"{PASSWORD}\0{key.key_id}\0{secret}".encode(),  # authzid mismatch
        f"\0{key.key_id}\0{PASSWORD}\0extra".encode(),  # malformed
    ):
        steps.append(await server.start("PLAIN", "10.0.0.1").step(message))
    await store.revoke_api_key(key.key_id, actor="a")
    steps.append(await server.start("PLAIN", "10.0.0.1").step(f"\0{key.key_id}\0{secret}".encode()))

    client = RfcClient("SCRAM-SHA-256", "alice", "wrong-" + PASSWORD, nonce=PASSWORD)
    scram = server.start("SCRAM-SHA-256", "10.0.0.1")
    first = await scram.step(client.first())
    assert first.challenge is not None
    final_message = client.final(first.challenge)
    steps.append(await scram.step(final_message))
    proof = final_message.decode().rpartition("p=")[2]
    scram = server.start("SCRAM-SHA-256", "10.0.0.1")
    steps.append(await scram.step(f"n,,n=alice,r={PASSWORD},{PASSWORD}".encode()))

    assert all(s.done and s.principal is None for s in steps)
    text = caplog.text + step_text(steps) + repr(hooks)
    assert not leaked(text, PASSWORD, secret, proof, key.secret_hash.split("$")[-1])
    await server.close()


async def test_store_outage_logs_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"  # a password in the URL
    store = open_store(CredentialStoreConfig(redis_url=url))
    server = sasl_server(store, "PLAIN")
    step = await server.start("PLAIN", "10.0.0.1").step(f"\0ak_x\0{PASSWORD}".encode())
    assert step.reason == "store_unavailable"
    assert await server.is_still_valid("User:a", "ak_x", "PLAIN")
    assert not leaked(caplog.text + step_text([step]), PASSWORD)
    await server.close()
