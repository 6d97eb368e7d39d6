"""The gateway's own SASL identity towards the brokers (``upstream.sasl``): a real
one-node Kafka cluster whose only listener is SASL_PLAINTEXT (SCRAM-SHA-512 and
PLAIN), users created at format time with credentials generated here, and
confluent-kafka producing and consuming through the gateway."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.tls.ca import CertificateAuthority, parse_san, parse_subject
from gateway.upstream.client import BrokerClient

from ..conftest import gateway_log_events
from .rawkafka import RawConnection
from .roundtrip_checks import wait_until

pytestmark = pytest.mark.integration


class Users:
    """The gateway's broker logins, generated for this run."""

    def __init__(self) -> None:
        self.scram = ("kgw-scram", secrets.token_hex(16))
        self.plain = ("kgw-plain", secrets.token_hex(16))
        self.wrong = secrets.token_hex(16)


@pytest.fixture(scope="module")
def users() -> Users:
    return Users()


@pytest.fixture(scope="module")
def sasl_cluster(users: Users, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka-sasl"), nodes=1, heap="384m",
        security_protocol="SASL_PLAINTEXT", sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"),
        sasl_users=dict([users.scram, users.plain]),
    )  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _password_file(workdir: Path, password: str) -> Path:
    path = workdir / "upstream.pass"
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return path


def start_gateway(
    cluster: KafkaCluster, workdir: Path, mechanism: str, user: str, password: str,
    ready: bool = True, tls: dict[str, Any] | None = None,
) -> GatewayProcess:  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    bootstrap, base = pick_ports()
    config = dev_config(cluster.bootstrap_servers, bootstrap, base)
    config["upstream"]["sasl"] = {
        "mechanism": mechanism,
        "username": user,
        "password_file": str(_password_file(workdir, password)),
        "timeout_s": 5,
    }
    config["upstream"]["connect_timeout_s"] = 5
    if tls is not None:
        config["upstream"]["tls"] = tls
    gateway = GatewayProcess(workdir, config)
    gateway.start(expected_brokers=1 if ready else None)
    return gateway


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    gateways: list[GatewayProcess] = []
    yield gateways
    for gateway in gateways:
        gateway.stop()


def roundtrip(gateway: GatewayProcess, count: int = 20) -> list[bytes]:
    """Create a topic, produce ``count`` records and consume them, all through the gateway."""
    topic = f"up-sasl-{uuid.uuid4().hex[:8]}"
    conf: dict[str, Any] = {"bootstrap.servers": gateway.bootstrap}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"record-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({
        **conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def _secret_free(gateway: GatewayProcess, *secrets_: str) -> None:
    text = gateway.log_path.read_text()
    for secret in secrets_:
        assert secret not in text


def test_the_cluster_refuses_connections_without_sasl(sasl_cluster: KafkaCluster) -> None:
    broker = sasl_cluster.brokers[1]
    with pytest.raises((asyncio.IncompleteReadError, OSError, ValueError)):
        asyncio.run(BrokerClient([broker], timeout_s=10.0).brokers(broker))


def test_scram_sha_512_upstream(
    sasl_cluster: KafkaCluster, users: Users, tmp_path: Path, started: list[GatewayProcess]
) -> None:
    user, password = users.scram
    gateway = start_gateway(sasl_cluster, tmp_path / "gw", "SCRAM-SHA-512", user, password)
    started.append(gateway)
    assert roundtrip(gateway) == [f"record-{i}".encode() for i in range(20)]
    assert gateway_log_events(gateway, "cluster_reachable")
    assert not gateway_log_events(gateway, "upstream_auth_failed")
    _secret_free(gateway, password)


def test_plain_upstream(
    sasl_cluster: KafkaCluster, users: Users, tmp_path: Path, started: list[GatewayProcess]
) -> None:
    user, password = users.plain
    gateway = start_gateway(sasl_cluster, tmp_path / "gw", "PLAIN", user, password)
    started.append(gateway)
    assert roundtrip(gateway, 5) == [f"record-{i}".encode() for i in range(5)]
    _secret_free(gateway, password)


def test_wrong_upstream_password_is_logged_and_clients_are_closed(
    sasl_cluster: KafkaCluster, users: Users, tmp_path: Path, started: list[GatewayProcess]
) -> None:
    user, _ = users.scram
    gateway = start_gateway(
        sasl_cluster, tmp_path / "gw", "SCRAM-SHA-512", user, users.wrong, ready=False
    )
    started.append(gateway)

    async def client_attempt() -> tuple[bool, float]:
        began = time.monotonic()
        conn = await RawConnection.open(gateway.bootstrap)
        try:
            await conn.send(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            closed = await conn.closed_by_peer(20)
        finally:
            conn.close()
        return closed, time.monotonic() - began

    closed, took = asyncio.run(client_attempt())
    assert closed, "the client connection must be closed, not left hanging"
    assert took < 15
    failures = gateway_log_events(gateway, "upstream_auth_failed")
    assert failures, gateway.log_tail()
    first = failures[0]
    assert first["mechanism"] == "SCRAM-SHA-512" and first["principal"] == user
    assert "sasl_authentication_failed" in first["reason"]

    def refresh_failed() -> list[dict[str, Any]]:
        return [
            e for e in gateway_log_events(gateway, "metadata_refresh_failed")
            if "credentials" in str(e["reason"])
        ]  # fmt: skip

    # the refresh loop logs its own failure on its schedule, not the client's
    wait_until(lambda: bool(refresh_failed()), 20, lambda: "metadata_refresh_failed")
    assert not gateway_log_events(gateway, "cluster_reachable")
    _secret_free(gateway, users.wrong)

    producer_errors: list[Any] = []
    admin = AdminClient(
        {"bootstrap.servers": gateway.bootstrap, "error_cb": producer_errors.append}
    )
    began = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - librdkafka reports a transport failure
        admin.list_topics(timeout=8)
    assert time.monotonic() - began < 12


def test_an_unusable_password_file_stops_the_gateway(
    sasl_cluster: KafkaCluster, tmp_path: Path
) -> None:
    bootstrap, base = pick_ports()
    config = dev_config(sasl_cluster.bootstrap_servers, bootstrap, base)
    config["upstream"]["sasl"] = {
        "mechanism": "SCRAM-SHA-512", "username": "kgw", "password_file": str(tmp_path / "nope"),
    }  # fmt: skip
    gateway = GatewayProcess(tmp_path / "gw", config)
    with pytest.raises(RuntimeError, match="exited with 2"):
        gateway.start(expected_brokers=None, timeout=30)
    failed = gateway_log_events(gateway, "start_failed")
    assert failed and "password_file" in failed[0]["reason"]


@pytest.fixture(scope="module")
def internal_ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """The private network's CA and the broker's certificate (IP SAN for 127.0.0.1)."""
    ca = CertificateAuthority.create(
        tmp_path_factory.mktemp("pki") / "internal", parse_subject("CN=Internal CA,O=KaaS")
    )
    ca.issue("broker", "server", parse_subject("CN=broker,O=KaaS"),
             sans=[parse_san("127.0.0.1"), parse_san("localhost")], also_client=True)  # fmt: skip
    return ca


@pytest.fixture(scope="module")
def sasl_ssl_cluster(
    users: Users, internal_ca: CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """One node whose only listener is SASL_SSL (SCRAM-SHA-512)."""
    stores = tmp_path_factory.mktemp("stores")
    store_pw = secrets.token_hex(12)
    internal_ca.export_pkcs12("broker", stores / "broker.p12", store_pw.encode())
    internal_ca.export_truststore(stores / "trust.p12", store_pw.encode())
    props = {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores / "broker.p12"),
        "ssl.keystore.password": store_pw, "ssl.key.password": store_pw,
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(stores / "trust.p12"),
        "ssl.truststore.password": store_pw,
    }  # fmt: skip
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka-sasl-ssl"), nodes=1, heap="384m",
        security_protocol="SASL_SSL", sasl_mechanisms=("SCRAM-SHA-512",),
        sasl_users=dict([users.scram]), extra_broker_props=props,
        client_config={"ssl.ca.location": str(internal_ca.cert_path)},
    )  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_scram_inside_upstream_tls(
    sasl_ssl_cluster: KafkaCluster, internal_ca: CertificateAuthority, users: Users,
    tmp_path: Path, started: list[GatewayProcess],
) -> None:  # fmt: skip
    user, password = users.scram
    tls = {"ca_files": [str(internal_ca.cert_path)]}
    gateway = start_gateway(
        sasl_ssl_cluster, tmp_path / "gw", "SCRAM-SHA-512", user, password, tls=tls
    )
    started.append(gateway)
    assert roundtrip(gateway, 5) == [f"record-{i}".encode() for i in range(5)]
    assert not gateway_log_events(gateway, "upstream_auth_failed")
    _secret_free(gateway, password)
    wrong = start_gateway(
        sasl_ssl_cluster, tmp_path / "gw-wrong", "SCRAM-SHA-512", user, users.wrong,
        ready=False, tls=tls,
    )  # fmt: skip
    started.append(wrong)
    deadline = time.monotonic() + 20
    while not gateway_log_events(wrong, "metadata_refresh_failed") and time.monotonic() < deadline:
        time.sleep(0.2)
    refresh = gateway_log_events(wrong, "metadata_refresh_failed")
    assert refresh and "sasl_authentication_failed" in str(refresh[0]["reason"])
