"""Pre-authentication hardening through a real gateway (decision 0024): a brute force
against one API key is in the access log under the key id it claimed and ``kgw
analyze`` finds it; a per-principal lockout refuses even the right secret; a frame
over the unauthenticated cap closes the connection from its size prefix alone, and
the full limit applies once authenticated."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.types import TopicName

from gateway.analytics import kinds
from gateway.analytics.findings import read_findings_json
from gateway.cli import main
from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.sasl.base import AUTH_FAILED, LOCKED_OUT

from ..conftest import GatewayFactory, gateway_log_events, sasl_listener
from ..redis_server import RedisServer, free_port
from . import workerprocs as wp
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
SASL_AUTHENTICATION_FAILED = 58
ATTEMPTS = 14  # over the per-principal burst threshold (12) of kgw analyze
LOCK_AFTER = 5
UNAUTHENTICATED_CAP = 512 * 1024


class Keys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.target = ("", "")  # (key id, secret): the key under attack
        self.other = ("", "")

    def make(self) -> None:
        async def run() -> None:
            store = open_store(CredentialStoreConfig(file=self.path))
            try:
                for name in ("target", "other"):
                    key, secret = await store.create_api_key(
                        principal=f"User:tenant-a.{name}", tenant="tenant-a", actor="test"
                    )
                    setattr(self, name, (key.key_id, secret))
            finally:
                await store.close()

        asyncio.run(run())


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    made = Keys(tmp_path_factory.mktemp("creds") / "credentials.json")
    made.make()
    return made


@pytest.fixture(scope="module")
def access_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("access")


@pytest.fixture(scope="module")
def hardened(gateway_factory: GatewayFactory, keys: Keys, access_dir: Path) -> GatewayProcess:
    return gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        accesslog={"path": str(access_dir / "access.log"), "max_bytes": 1 << 20},
        sasl={
            "mechanisms": ["PLAIN", "SCRAM-SHA-256"],
            "credential_store": {"file": str(keys.path)},
            "failure_limiter": {
                "max_failures": 100,  # no delays: the test is about the lockout
                "base_delay_s": 0.05,
                "max_delay_s": 0.05,
                "lockout_principal_failures": LOCK_AFTER,
                "lockout_s": 600,
            },
        },
    )


async def _login(address: str, key_id: str, secret: str) -> tuple[SaslAuthenticateResponse, bool]:
    """One PLAIN attempt on a fresh connection: the answer, and whether the gateway then
    closed the connection."""
    connection = await RawConnection.open(address)
    try:
        shake = await connection.request(
            SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
        )
        assert shake.error_code == 0, shake
        token = f"\0{key_id}\0{secret}".encode()
        answer = await connection.request(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        closed = answer.error_code == 0 or await connection.closed_by_peer(10)
        return answer, closed
    finally:
        connection.close()


def _records(directory: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted(directory.glob("access.log*")):
        lines.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return lines


def _failed_logins(directory: Path, wanted: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30  # the writer drains off the data path
    while True:
        failed = [
            r for r in _records(directory) if r["event"] == "auth" and r["outcome"] == "failure"
        ]
        if len(failed) >= wanted or time.monotonic() > deadline:
            return failed
        time.sleep(0.2)


def test_brute_force_against_one_key_is_logged_under_it_and_found(
    hardened: GatewayProcess, keys: Keys, access_dir: Path, tmp_path: Path
) -> None:
    key_id, secret = keys.target

    async def attack() -> list[SaslAuthenticateResponse]:
        answers = []
        for n in range(ATTEMPTS):
            answer, closed = await _login(hardened.bootstrap, key_id, f"sk_wrong{n}")
            assert closed
            answers.append(answer)
        right, closed = await _login(hardened.bootstrap, key_id, secret)  # locked out
        assert closed
        other, _ = await _login(hardened.bootstrap, *keys.other)  # another key still works
        return [*answers, right, other]

    answers = asyncio.run(attack())
    *failures, right, other = answers
    assert all(a.error_code == SASL_AUTHENTICATION_FAILED for a in failures)
    assert [a.error_message for a in failures[:LOCK_AFTER]] == [AUTH_FAILED] * LOCK_AFTER
    assert {a.error_message for a in failures[LOCK_AFTER:]} == {LOCKED_OUT}
    assert (right.error_code, right.error_message) == (SASL_AUTHENTICATION_FAILED, LOCKED_OUT)
    assert other.error_code == 0, other.error_message

    lockouts = gateway_log_events(hardened, "sasl_lockout")
    assert [(e["reason"], e["principal"]) for e in lockouts] == [("principal", key_id)]

    failed = _failed_logins(access_dir, ATTEMPTS + 1)
    assert len(failed) == ATTEMPTS + 1
    for record in failed:
        assert record["claimed"] == record["api_key_id"] == key_id
        assert record["principal"] == "User:ANONYMOUS" and record["sasl_mechanism"] == "PLAIN"
        assert record["client_host"] == "127.0.0.1"
    reasons = [r["reason"] for r in failed]
    assert reasons == ["wrong_secret"] * LOCK_AFTER + ["locked_out"] * (ATTEMPTS + 1 - LOCK_AFTER)
    everything = "".join(p.read_text() for p in access_dir.glob("access.log*"))
    everything += "\n".join(hardened.log_records())
    assert secret not in everything and "sk_wrong" not in everything

    out = tmp_path / "analysis"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["analyze", "--logs", str(access_dir), "--out", str(out), "--no-report"])
    assert code == 0, stderr.getvalue()
    findings = read_findings_json(out / "findings.json")
    bursts = [f for f in findings if f.detector == kinds.AUTH_BURST_PRINCIPAL]
    assert [f.principal for f in bursts] == [key_id], findings
    assert bursts[0].evidence["failures"] == ATTEMPTS + 1


def test_a_refused_login_reaches_a_client_that_reads_until_it_would_block(
    hardened: GatewayProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python reads until the socket would block and drops what it read when the
    peer's close came with it. The gateway keeps the socket open a moment after a refusal
    (``CLOSE_LINGER_S``), so such a client learns why it was refused, not just that the
    connection went. The key id is unknown, so no other test's key is locked."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaError):
        KafkaProducer(
            bootstrap_servers=hardened.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="AK-nobody-lazy-reader",
            sasl_plain_password="sk_wrong-lazy",
            bootstrap_timeout_ms=3000,
            reconnect_backoff_ms=500,
            reconnect_backoff_max_ms=500,
        ).close()
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "socket disconnected" not in caplog.text


def test_requests_sent_behind_a_refused_login_are_never_served(hardened: GatewayProcess) -> None:
    """While the gateway holds a refused connection open for the client to read why, the
    client is still unauthenticated: a Metadata request pipelined behind the wrong
    secret, and another sent after the refusal, get no answer; only the refusal comes
    back, then the gateway closes."""

    async def run() -> None:
        connection = await RawConnection.open(hardened.bootstrap)
        try:
            shake = await connection.request(
                SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
            )
            assert shake.error_code == 0
            metadata = MetadataRequest(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )  # fmt: skip
            auth = SaslAuthenticateRequest(auth_bytes=b"\0AK-nobody-pipelined\0sk_wrong")
            await connection.send(auth)
            await connection.send(metadata)  # pipelined behind the wrong secret
            answer = await connection.receive(auth, SaslAuthenticateResponse)
            assert answer.error_code == SASL_AUTHENTICATION_FAILED
            with contextlib.suppress(ConnectionError):
                await connection.send(metadata)  # after the refusal, inside the linger
            assert await connection.closed_by_peer(10), "nothing more, then the close"
        finally:
            connection.close()

    asyncio.run(run())


def test_oversize_frame_before_authentication_is_refused_from_its_prefix(
    hardened: GatewayProcess, keys: Keys
) -> None:
    async def run() -> None:
        connection = await RawConnection.open(hardened.bootstrap)
        try:  # only the size prefix: the gateway decides before any body arrives
            await connection.send_raw(struct.pack(">i", UNAUTHENTICATED_CAP + 1))
            assert await connection.closed_by_peer(10)
        finally:
            connection.close()

        connection = await RawConnection.open(hardened.bootstrap)
        try:  # a SaslAuthenticate just over the cap, mid-handshake
            shake = await connection.request(
                SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
            )
            assert shake.error_code == 0
            await connection.send(SaslAuthenticateRequest(auth_bytes=b"x" * UNAUTHENTICATED_CAP))
            assert await connection.closed_by_peer(10)
        finally:
            connection.close()

        connection = await RawConnection.open(hardened.bootstrap)
        try:  # authenticated: a request over the unauthenticated cap is served
            answer = await connection.request(
                SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
            )
            assert answer.error_code == 0
            key_id, secret = keys.other
            auth = await connection.request(
                SaslAuthenticateRequest(auth_bytes=f"\0{key_id}\0{secret}".encode()),
                SaslAuthenticateResponse,
            )
            assert auth.error_code == 0, auth.error_message
            names = [f"missing-{n:06d}-{'x' * 30}" for n in range(16_000)]  # about 700 KiB
            request = MetadataRequest(
                topics=tuple(MetadataRequestTopic(name=TopicName(n), topic_id=None) for n in names),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            metadata = await connection.request(request, MetadataResponse, timeout_s=60)
            assert len(metadata.topics) == len(names)
        finally:
            connection.close()

    asyncio.run(run())
    closes = [
        e["reason"] for e in gateway_log_events(hardened, "connection_closed")
        if "before authentication" in e.get("reason", "")
    ]  # fmt: skip
    assert len(closes) == 2, closes
    assert closes[0] == (
        f"frame of {UNAUTHENTICATED_CAP + 1} bytes before authentication exceeds the limit of "
        f"{UNAUTHENTICATED_CAP} (limits.max_unauthenticated_request_bytes)"
    )
    assert f"exceeds the limit of {UNAUTHENTICATED_CAP}" in closes[1]


def test_a_lockout_counts_the_failures_every_worker_saw(
    gateway_factory: GatewayFactory, keys: Keys, tmp_path: Path
) -> None:
    """Two workers share one port (SO_REUSEPORT picks one per connection): failures
    spread over both count together through Redis, so after LOCK_AFTER of them every
    attempt is refused on whichever worker it lands, the right secret included. Counted
    per worker, the right secret would get through on a worker that saw fewer."""
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        gateway = gateway_factory(
            wait_ready=False,
            server={"workers": 2},
            metrics={"port": free_port()},
            listeners=[sasl_listener()],
            sasl={
                "mechanisms": ["PLAIN"],
                "credential_store": {"file": str(keys.path)},
                "failure_limiter": {
                    "max_failures": 100,
                    "base_delay_s": 0.05,
                    "max_delay_s": 0.05,
                    "lockout_principal_failures": LOCK_AFTER,
                    "lockout_s": 600,
                    "redis_url": redis.url,
                },
            },
        )
        assert gateway.pid is not None
        wp.wait_workers(gateway.pid, 2)
        key_id, secret = keys.target

        async def attack() -> tuple[list[SaslAuthenticateResponse], ...]:
            wrong = [
                (await _login(gateway.bootstrap, key_id, f"sk_wrong{n}"))[0]
                for n in range(LOCK_AFTER)
            ]
            await asyncio.sleep(0.5)  # the last notice reaches every worker
            right = [(await _login(gateway.bootstrap, key_id, secret))[0] for _ in range(8)]
            other = [(await _login(gateway.bootstrap, *keys.other))[0] for _ in range(8)]
            return wrong, right, other

        wrong, right, other = asyncio.run(attack())
        assert [a.error_message for a in wrong] == [AUTH_FAILED] * LOCK_AFTER
        assert [(a.error_code, a.error_message) for a in right] == [
            (SASL_AUTHENTICATION_FAILED, LOCKED_OUT)
        ] * len(right)
        assert [a.error_code for a in other] == [0] * len(other)  # another key, both workers
        served = {e.get("worker") for e in gateway_log_events(gateway, "authentication")}
        assert len(served - {None}) == 2, served  # both workers answered logins
        assert not [e for e in gateway_log_events(gateway, "sasl_sharing_down")]
    finally:
        redis.kill()
