"""SASL at the gateway with real clients: API keys over PLAIN, SCRAM-SHA-256/512,
failures, revocation and re-authentication (KIP-368)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, gateway_log_events, sasl_listener
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
LIFETIME_S = 4.0


class Creds:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = open_store(CredentialStoreConfig(file=path))
        self.key_id = ""
        self.secret = ""
        self.scram: dict[str, tuple[str, str]] = {}

    def make(self) -> None:
        async def run() -> None:
            key, secret = await self.store.create_api_key(
                principal="User:tenant-a.orders", tenant="tenant-a", actor="test"
            )
            self.key_id, self.secret = key.key_id, secret
            for mechanism, user in (("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "bob")):
                password = f"pw-{time.monotonic_ns()}"
                await self.store.put_scram(user, mechanism, password, iterations=4096, actor="test")
                self.scram[mechanism] = (user, password)

        asyncio.run(run())

    def revoke(self) -> None:
        asyncio.run(self.store.revoke_api_key(self.key_id, actor="test"))


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> Creds:
    creds = Creds(tmp_path_factory.mktemp("creds") / "credentials.json")
    creds.make()
    return creds


def _sasl_gateway(
    gateway_factory: GatewayFactory, creds: Creds, *mechanisms: str, **settings: Any
) -> GatewayProcess:
    """A gateway with one SASL listener, its credentials in ``creds``' file store."""
    return gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        sasl={
            "mechanisms": list(mechanisms),
            "credential_store": {"file": str(creds.path)},
            **settings,
        },
    )


@pytest.fixture(scope="module")
def sasl_gateway(gateway_factory: GatewayFactory, creds: Creds) -> GatewayProcess:
    mechanisms = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    return _sasl_gateway(
        gateway_factory,
        creds,
        *mechanisms,
        session_lifetime_s=LIFETIME_S,
        revalidate_interval_s=0,  # revocation here is the KIP-368 lifetime's to find
        failure_limiter={"max_failures": 50, "base_delay_s": 0.1, "max_delay_s": 0.5},
    )


def _conf(gateway: GatewayProcess, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
    }  # fmt: skip


def _roundtrip_confluent(conf: dict[str, Any], topic: str) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(30) == 0


def test_api_key_over_plain_and_scram_with_confluent(
    sasl_gateway: GatewayProcess, creds: Creds, topic: str
) -> None:
    _roundtrip_confluent(_conf(sasl_gateway, "PLAIN", creds.key_id, creds.secret), topic + "-p")
    for mechanism, (user, password) in creds.scram.items():
        _roundtrip_confluent(_conf(sasl_gateway, mechanism, user, password), f"{topic}-{user}")
    successes = [
        e for e in gateway_log_events(sasl_gateway, "authentication") if e["outcome"] == "success"
    ]
    assert {e["principal"] for e in successes} >= {"User:tenant-a.orders", "User:alice", "User:bob"}


def test_kafka_python_and_aiokafka_scram(
    sasl_gateway: GatewayProcess, creds: Creds, topic: str
) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    admin = AdminClient(_conf(sasl_gateway, "PLAIN", creds.key_id, creds.secret))
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    user, password = creds.scram["SCRAM-SHA-512"]
    producer = KafkaProducer(
        bootstrap_servers=sasl_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user, sasl_plain_password=password,
    )  # fmt: skip
    producer.send(topic, b"from kafka-python").get(timeout=30)
    producer.close()

    async def aio() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=sasl_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username=creds.key_id,
            sasl_plain_password=creds.secret,
        )  # fmt: skip
        await p.start()
        try:
            await p.send_and_wait(topic, b"from aiokafka")
        finally:
            await p.stop()

    asyncio.run(aio())


def test_java_tools_with_plain_and_scram(
    sasl_gateway: GatewayProcess, creds: Creds, kafka_cluster: KafkaCluster, tmp_path: Path,
    topic: str,
) -> None:  # fmt: skip
    user, password = creds.scram["SCRAM-SHA-256"]
    cases = {
        "plain": ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule",
                  creds.key_id, creds.secret),
        "scram": ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule",
                  user, password),
    }  # fmt: skip
    for name, (mechanism, module, login, secret) in cases.items():
        props = tmp_path / f"{name}.properties"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism={mechanism}\n"
            f'sasl.jaas.config={module} required username="{login}" password="{secret}";\n'
        )
        props.chmod(0o600)
        created = kafka_cluster.run_tool("topics", [
            "--bootstrap-server", sasl_gateway.bootstrap, "--command-config", str(props),
            "--create", "--topic", f"{topic}-{name}", "--partitions", "1",
            "--replication-factor", "3",
        ])  # fmt: skip
        assert created.returncode == 0, created.stderr.decode()[-1500:]
        produced = kafka_cluster.run_tool(
            "console-producer",
            ["--bootstrap-server", sasl_gateway.bootstrap, "--topic", f"{topic}-{name}",
             "--producer.config", str(props)],
            input=b"one\ntwo\nthree\n",
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr.decode()[-1500:]
        consumed = kafka_cluster.run_tool("console-consumer", [
            "--bootstrap-server", sasl_gateway.bootstrap, "--topic", f"{topic}-{name}",
            "--from-beginning", "--max-messages", "3", "--consumer.config", str(props),
            "--timeout-ms", "30000",
        ])  # fmt: skip
        assert consumed.stdout.decode().split() == ["one", "two", "three"], consumed.stderr[-800:]


def _auth_error(conf: dict[str, Any]) -> KafkaError | None:
    errors: list[KafkaError] = []
    # Expected to fail: the error comes through error_cb, and librdkafka's own log of
    # each retry (the client retries until it is freed) would only clutter the output.
    admin = AdminClient({**conf, "error_cb": errors.append, "log_level": 0})
    with contextlib.suppress(Exception):  # the failure is reported through error_cb
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    return next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)


class Healthy:
    """An authenticated producer that keeps producing while failures happen."""

    def __init__(self, conf: dict[str, Any], topic: str) -> None:
        admin = AdminClient(conf)  # kept alive until the topic exists
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        self.producer = Producer({**conf, "acks": "all"})
        self.topic, self.delivered, self.failed = topic, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        def report(err: Any, _m: Any) -> None:
            if err is None:
                self.delivered += 1
            else:
                self.failed += 1

        while not self._stop.is_set():
            self.producer.produce(self.topic, value=b"x", on_delivery=report)
            self.producer.poll(0.01)

    def stop(self, flush_s: float = 20.0) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.producer.flush(flush_s):
            self.producer.purge()  # a revoked client's records can never be delivered
            self.producer.poll(0)  # serve the purged records' reports: their callbacks hold self
        # A revoked client's producer would go on logging in (and failing) every half
        # second for the rest of the session: let librdkafka's handle go now.
        del self.producer


def test_failures_are_refused_while_a_healthy_client_works(
    sasl_gateway: GatewayProcess, creds: Creds, topic: str
) -> None:
    user, password = creds.scram["SCRAM-SHA-256"]
    healthy = Healthy(_conf(sasl_gateway, "SCRAM-SHA-256", user, password), topic)
    try:
        bad = {
            "wrong secret": _conf(sasl_gateway, "PLAIN", creds.key_id, "not-the-secret"),
            "unknown user": _conf(sasl_gateway, "SCRAM-SHA-256", "nobody", "whatever"),
            "wrong scram password": _conf(sasl_gateway, "SCRAM-SHA-256", user, "wrong"),
            "mechanism not enabled": _conf(sasl_gateway, "SCRAM-SHA-512", user, password)
            | {"sasl.mechanism": "OAUTHBEARER"},
        }
        for case, conf in bad.items():
            if case == "mechanism not enabled":
                conf = {k: v for k, v in conf.items() if not k.startswith("sasl.user")}
                conf.pop("sasl.password", None)
                conf["sasl.oauthbearer.config"] = "principal=mallory"
                conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
            assert _auth_error(conf) is not None, case
        before = healthy.delivered
        deadline = time.monotonic() + 10
        while healthy.delivered < before + 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert healthy.delivered >= before + 20
    finally:
        healthy.stop()
    assert healthy.failed == 0
    failures = [
        e for e in gateway_log_events(sasl_gateway, "authentication") if e["outcome"] == "failure"
    ]
    assert len(failures) >= 3
    log_text = sasl_gateway.log_path.read_text()
    assert (
        creds.secret not in log_text
        and password not in log_text
        and "not-the-secret" not in log_text
    )


def test_requests_before_authentication_close_the_connection(sasl_gateway: GatewayProcess) -> None:
    async def run() -> bool:
        conn = await RawConnection.open(sasl_gateway.bootstrap)
        try:  # a Metadata v12 request with no SASL exchange first
            body = b"\x01\x00\x00\x00"
            header = struct.pack(">hhih", 3, 12, 1, 1) + b"t" + b"\x00"
            await conn.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
            return await conn.closed_by_peer(5)
        finally:
            conn.close()

    assert asyncio.run(run())
    closed = gateway_log_events(sasl_gateway, "connection_closed")
    assert any("before SASL authentication" in str(e["reason"]) for e in closed)


def test_reauthentication_and_revocation(
    sasl_gateway: GatewayProcess, creds: Creds, topic: str
) -> None:
    conf = _conf(sasl_gateway, "PLAIN", creds.key_id, creds.secret)
    healthy = Healthy(conf, topic)
    try:
        time.sleep(LIFETIME_S * 2.5)  # well past two session lifetimes: clients re-authenticated
        assert healthy.failed == 0 and healthy.delivered > 0
        creds.revoke()
        revoked_at = time.monotonic()
        delivered = healthy.delivered
        deadline = revoked_at + LIFETIME_S * 3
        while time.monotonic() < deadline and healthy.failed == 0:
            time.sleep(0.2)
    finally:
        healthy.stop()
    assert healthy.delivered >= delivered
    reauth = [
        e for e in gateway_log_events(sasl_gateway, "authentication")
        if e["outcome"] == "success" and e["principal"] == "User:tenant-a.orders"
    ]  # fmt: skip
    assert len(reauth) >= 3, "clients re-authenticated within their session lifetime"
    refused = [
        e for e in gateway_log_events(sasl_gateway, "authentication")
        if e["outcome"] == "failure" and e.get("principal") == creds.key_id
    ]  # fmt: skip
    closed = [e for e in gateway_log_events(sasl_gateway, "connection_closed")]
    assert refused or any("lifetime" in str(e["reason"]) for e in closed)
    assert _auth_error(conf) is not None  # and no new connection gets in


@pytest.fixture(scope="module")
def revalidating_gateway(gateway_factory: GatewayFactory, creds: Creds) -> GatewayProcess:
    """Sessions live an hour, but credentials are checked again every half second."""
    return _sasl_gateway(
        gateway_factory,
        creds,
        "PLAIN",
        "SCRAM-SHA-256",
        session_lifetime_s=3600,
        revalidate_interval_s=REVALIDATE_S,
        # the revoked producer keeps retrying from 127.0.0.1: do not slow it down
        failure_limiter={"max_failures": 500, "base_delay_s": 0.1, "max_delay_s": 0.5},
    )


REVALIDATE_S = 0.5


def _revoked(gateway: GatewayProcess, principal: str) -> list[dict[str, Any]]:
    return [
        e
        for e in gateway_log_events(gateway, "sasl_credentials_revoked")
        if e.get("principal") == principal
    ]


def _wait_for(check: Any, timeout_s: float) -> float:
    """Seconds until ``check()`` is true; fails after ``timeout_s``."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout_s, "timed out"
        time.sleep(0.1)
    return time.monotonic() - began


def test_revoked_key_and_removed_user_lose_their_live_connections(
    revalidating_gateway: GatewayProcess, creds: Creds, topic: str
) -> None:
    """Well inside the session lifetime, revoking an API key closes the connections
    authenticated with it, and removing a SCRAM user closes theirs; another principal's
    producer keeps delivering throughout."""
    gateway = revalidating_gateway
    key_principal, scram_principal = "User:tenant-a.live", "User:carol"
    password = f"pw-{time.monotonic_ns()}"

    async def make() -> tuple[str, str]:
        key, secret = await creds.store.create_api_key(
            principal=key_principal, tenant="tenant-a", actor="test"
        )
        await creds.store.put_scram(
            "carol", "SCRAM-SHA-256", password, iterations=4096, actor="test"
        )
        return key.key_id, secret

    key_id, secret = asyncio.run(make())
    user, other_password = creds.scram["SCRAM-SHA-256"]
    keyed = Healthy(_conf(gateway, "PLAIN", key_id, secret), f"{topic}-key")
    scram = Healthy(_conf(gateway, "SCRAM-SHA-256", "carol", password), f"{topic}-scram")
    other = Healthy(_conf(gateway, "SCRAM-SHA-256", user, other_password), f"{topic}-other")
    try:
        _wait_for(lambda: min(keyed.delivered, scram.delivered, other.delivered) > 0, 30)
        assert not _revoked(gateway, key_principal) and not _revoked(gateway, scram_principal)

        asyncio.run(creds.store.revoke_api_key(key_id, actor="test"))
        took = _wait_for(lambda: bool(_revoked(gateway, key_principal)), 10)
        assert took < REVALIDATE_S * 6, f"revocation took {took:.1f}s to reach the connection"
        assert _revoked(gateway, key_principal)[0]["count"] >= 1

        asyncio.run(creds.store.remove_scram("carol", ["SCRAM-SHA-256"], actor="test"))
        _wait_for(lambda: bool(_revoked(gateway, scram_principal)), 10)

        delivered = other.delivered
        _wait_for(lambda: other.delivered > delivered + 10, 10)  # still producing
        assert other.failed == 0
        assert not _revoked(gateway, f"User:{user}")
        closed = [
            e
            for e in gateway_log_events(gateway, "connection_closed")
            if e.get("reason") == "credentials revoked or removed"
        ]
        counted = sum(
            e["count"] for p in (key_principal, scram_principal) for e in _revoked(gateway, p)
        )
        assert len(closed) == counted >= 2
    finally:
        for producer in (keyed, scram):
            producer.stop(flush_s=0)
        other.stop()
    assert _auth_error(_conf(gateway, "PLAIN", key_id, secret)) is not None  # no way back in
