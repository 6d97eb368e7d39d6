"""TLS to the brokers: the gateway in front of a Kafka cluster that offers only an SSL
listener (with client authentication), connecting with its own client certificate and
verifying the brokers' certificates. Keystores for the brokers come from ``kgw certs``."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess, dev_config
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.tls.ca import CertificateAuthority

from .conftest import (
    Pki,
    events,
    kgw_certs,
    tls_listener,
    tls_section,
    wait_for_event,
    wait_tls_ready,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def internal(pki: Pki) -> CertificateAuthority:
    """The private network's CA: broker certificates and the gateway's upstream identity."""
    kgw_certs(pki.root, "init-ca", "internal", "--subject", "CN=Internal Brokers CA,O=KaaS")
    kgw_certs(pki.root, "server", "internal", "broker", "--san", "127.0.0.1", "--san",
              "localhost", "--also-client")  # fmt: skip
    kgw_certs(pki.root, "client", "internal", "gateway-upstream", "--subject", "CN=kgw,O=KaaS")
    return CertificateAuthority(pki.root / "internal")


@pytest.fixture(scope="module")
def ssl_cluster(
    internal: CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    stores = tmp_path_factory.mktemp("broker-stores")
    keystore, truststore = stores / "broker.p12", stores / "truststore.p12"
    kgw_certs(internal.dir.parent, "export", "internal", "broker", "--out", str(keystore),
              "--password-file", str(stores / "keystore.pass"))  # fmt: skip
    kgw_certs(internal.dir.parent, "truststore", "internal", "--out", str(truststore),
              "--password-file", str(stores / "truststore.pass"))  # fmt: skip
    key_pw = (stores / "keystore.pass").read_text().strip()
    props = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": key_pw,
        "ssl.key.password": key_pw,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(truststore),
        "ssl.truststore.password": (stores / "truststore.pass").read_text().strip(),
        "ssl.client.auth": "required",
    }
    issued = internal.dir / "issued"
    probe = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(internal.cert_path),
        "ssl.certificate.location": str(issued / "broker.pem"),
        "ssl.key.location": str(issued / "broker.key"),
    }
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-ssl"), nodes=1, heap="384m",
                           extra_broker_props=props, security_protocol="SSL",
                           client_config=probe)  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def upstream_tls(internal: CertificateAuthority, **more: Any) -> dict[str, Any]:
    issued = internal.dir / "issued"
    return {
        "ca_files": [str(internal.cert_path)],
        "cert_file": str(issued / "gateway-upstream.pem"),
        "key_file": str(issued / "gateway-upstream.key"),
        **more,
    }


def start(
    cluster: KafkaCluster, workdir: Path, listener: dict[str, Any], upstream_tls: dict[str, Any]
) -> GatewayProcess:
    config = dev_config(cluster.bootstrap_servers, listener["bootstrap_port"],
                        listener["broker_port_base"], listeners=[listener])  # fmt: skip
    config["upstream"]["tls"] = upstream_tls
    gateway = GatewayProcess(workdir, config)
    gateway.start(expected_brokers=None)
    return gateway


@pytest.fixture(scope="module")
def gateway_ssl(
    ssl_cluster: KafkaCluster, internal: CertificateAuthority, pki: Pki,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:  # fmt: skip
    gw = start(ssl_cluster, tmp_path_factory.mktemp("gw-ssl"), tls_listener(tls_section(pki)),
               upstream_tls(internal))  # fmt: skip
    try:
        wait_tls_ready(gw, pki.context("healthy"), 1)
        yield gw
    finally:
        gw.stop()


def test_the_cluster_offers_only_ssl_with_client_auth(
    ssl_cluster: KafkaCluster, internal: CertificateAuthority
) -> None:
    ((host, port),) = ssl_cluster.brokers.values()
    plaintext = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 0})
    with pytest.raises(KafkaException):
        plaintext.list_topics(timeout=3)
    context = ssl.create_default_context(cafile=str(internal.cert_path))
    with (
        socket.create_connection((host, port), timeout=5) as sock,  # no client certificate
        context.wrap_socket(sock, server_hostname=host) as tls,
    ):
        tls.sendall(b"\x00\x00\x00\x01\x00")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            if tls.recv(1) == b"":
                raise ConnectionError("closed")


def test_clients_round_trip_through_gateway_to_ssl_cluster(
    gateway_ssl: GatewayProcess, pki: Pki, ssl_cluster: KafkaCluster, topic: str
) -> None:
    conf = {"bootstrap.servers": f"localhost:{gateway_ssl.listener['bootstrap_port']}",
            **pki.confluent("confluent-app")}  # fmt: skip
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    md = admin.list_topics(timeout=10)
    (broker,) = md.brokers.values()
    assert (broker.host, broker.port) == ("localhost", gateway_ssl.public_port(1))
    producer = Producer({**conf, "acks": "all"})
    for i in range(500):
        producer.produce(topic, value=f"r{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 500 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.add(msg.value())
    consumer.close()
    assert seen == {f"r{i}".encode() for i in range(500)}
    assert not events(gateway_ssl, "upstream_connect_failed")


def test_gateway_verifies_the_brokers(
    ssl_cluster: KafkaCluster, pki: Pki, internal: CertificateAuthority, tmp_path: Path
) -> None:
    """Trusting the wrong CA for the brokers, the gateway refuses to talk to them."""
    wrong = upstream_tls(internal, ca_files=[str(pki.gateway.cert_path)])
    gw = start(ssl_cluster, tmp_path, tls_listener(tls_section(pki)), wrong)
    try:
        record = wait_for_event(gw, "metadata_refresh_failed", timeout=20)
        assert "CERTIFICATE_VERIFY_FAILED" in record["reason"]
        assert not events(gw, "cluster_reachable")
    finally:
        gw.stop()
