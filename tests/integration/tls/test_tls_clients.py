"""Acceptance: confluent-kafka, kafka-python and Kafka's Java tools (with a PKCS#12
keystore from ``kgw certs export``) produce and consume through an mTLS listener,
and the principal mapped from each client's certificate is what the gateway logs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from .conftest import (
    Pki,
    StartTls,
    access_log,
    access_records,
    events,
    kgw_certs,
    tls_listener,
    tls_section,
)

pytestmark = pytest.mark.integration

RECORDS = 100


@pytest.fixture(scope="module")
def access_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("access")


@pytest.fixture(scope="module")
def mtls(start_tls_gateway: StartTls, pki: Pki, access_dir: Path) -> GatewayProcess:
    return start_tls_gateway(tls_listener(tls_section(pki)), accesslog=access_log(access_dir))


def bootstrap(gw: GatewayProcess) -> str:
    return f"localhost:{gw.listener['bootstrap_port']}"


def create_topic(gw: GatewayProcess, pki: Pki, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(gw), **pki.confluent("confluent-app")})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)


def confluent_roundtrip(gw: GatewayProcess, pki: Pki, topic: str) -> None:
    conf = {"bootstrap.servers": bootstrap(gw), **pki.confluent("confluent-app")}
    producer = Producer({**conf, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=f"cf-{i}".encode())
    assert producer.flush(30) == 0


def kafka_python_roundtrip(gw: GatewayProcess, pki: Pki, topic: str) -> None:
    ssl_args: dict[str, Any] = {
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.gateway.cert_path),
        "ssl_certfile": str(pki.cert(pki.tenant_a, "kpy-app")),
        "ssl_keyfile": str(pki.key(pki.tenant_a, "kpy-app")),
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap(gw), acks="all", **ssl_args)
    for i in range(RECORDS):
        producer.send(topic, f"kp-{i}".encode())
    producer.flush(30)
    producer.close()


def java_properties(pki: Pki, tmp: Path) -> Path:
    """Keystore and truststore made by ``kgw certs``, as a Java client's SSL settings."""
    keystore, key_pw = tmp / "java-app.p12", tmp / "java-app.pass"
    truststore, trust_pw = tmp / "truststore.p12", tmp / "truststore.pass"
    kgw_certs(pki.root, "export", "tenant-a", "java-app", "--out", str(keystore),
              "--password-file", str(key_pw))  # fmt: skip
    kgw_certs(pki.root, "truststore", "gateway", "--out", str(truststore),
              "--password-file", str(trust_pw))  # fmt: skip
    assert keystore.stat().st_mode & 0o077 == 0, "keystore readable by others"
    props = tmp / "client.properties"
    props.write_text(
        "security.protocol=SSL\n"
        "ssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={keystore}\n"
        f"ssl.keystore.password={key_pw.read_text().strip()}\n"
        f"ssl.key.password={key_pw.read_text().strip()}\n"
        "ssl.truststore.type=PKCS12\n"
        f"ssl.truststore.location={truststore}\n"
        f"ssl.truststore.password={trust_pw.read_text().strip()}\n"
    )
    return props


def run_java(cluster: KafkaCluster, tool: str, args: list[str], stdin: bytes | None = None) -> str:
    proc = cluster.run_tool(tool, args, timeout=180, input=stdin)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout.decode()


def test_three_clients_produce_and_consume_over_mtls(
    mtls: GatewayProcess,
    pki: Pki,
    kafka_cluster: KafkaCluster,
    topic: str,
    tmp_path: Path,
) -> None:
    create_topic(mtls, pki, topic)
    confluent_roundtrip(mtls, pki, topic)
    kafka_python_roundtrip(mtls, pki, topic)
    props = java_properties(pki, tmp_path)
    lines = "".join(f"java-{i}\n" for i in range(RECORDS)).encode()
    run_java(kafka_cluster, "console-producer",
             ["--bootstrap-server", bootstrap(mtls), "--topic", topic,
              "--producer.config", str(props), "--producer-property", "acks=all"],
             stdin=lines)  # fmt: skip
    expected = {f"{p}-{i}" for p in ("cf", "kp", "java") for i in range(RECORDS)}

    # every client reads everything back
    conf = {"bootstrap.servers": bootstrap(mtls), **pki.confluent("confluent-app")}
    consumer = Consumer({**conf, "group.id": f"cf-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while seen != expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.add(msg.value().decode())
    consumer.close()
    assert seen == expected

    kp = KafkaConsumer(
        topic, bootstrap_servers=bootstrap(mtls), auto_offset_reset="earliest",
        group_id=f"kp-{topic}", consumer_timeout_ms=15000, security_protocol="SSL",
        ssl_cafile=str(pki.gateway.cert_path),
        ssl_certfile=str(pki.cert(pki.tenant_a, "kpy-app")),
        ssl_keyfile=str(pki.key(pki.tenant_a, "kpy-app")),
    )  # fmt: skip
    kp_seen = set()
    for record in kp:
        kp_seen.add(record.value.decode())
        if len(kp_seen) == len(expected):
            break
    kp.close()
    assert kp_seen == expected

    out = run_java(kafka_cluster, "console-consumer",
                   ["--bootstrap-server", bootstrap(mtls), "--topic", topic, "--from-beginning",
                    "--max-messages", str(len(expected)), "--timeout-ms", "60000",
                    "--consumer.config", str(props)])  # fmt: skip
    assert set(out.split()) == expected

    # the principal mapped from each certificate (RULE ... $2.$1, lower-cased)
    established = events(mtls, "tls_established")
    principals = {e["principal"] for e in established}
    assert {"User:payments.confluent-app", "User:payments.kpy-app",
            "User:payments.java-app"} <= principals  # fmt: skip
    for record in established:
        assert record["tls_version"] in {"TLSv1.2", "TLSv1.3"}
        assert record["subject"].startswith("CN=") and record["cipher"]
    # the brokers' connections were per-broker TLS connections too
    assert {e.get("node_id") for e in established} >= {1, 2, 3}


def test_principals_in_the_access_log(mtls: GatewayProcess, access_dir: Path) -> None:
    """Every request record carries the principal mapped from the client's certificate."""
    wanted = {"User:payments.confluent-app", "User:payments.kpy-app", "User:payments.java-app"}

    def produced_by_all(records: list[dict[str, Any]]) -> bool:
        return wanted <= {r["principal"] for r in records if r.get("api") == "produce"}

    records = access_records(access_dir, produced_by_all)
    produce = [r for r in records if r.get("api") == "produce"]
    assert wanted <= {r["principal"] for r in produce}
    assert "User:ANONYMOUS" not in {r["principal"] for r in records if r["type"] == "request"}
    # A connection whose client hung up inside the TLS handshake (a retry on a loaded
    # machine) never had a certificate: its records, and only those, are anonymous.
    refused = {r["conn"] for r in records if r.get("event") == "tls" and r["outcome"] != "success"}
    anonymous = {r["conn"] for r in records if r["principal"] == "User:ANONYMOUS"}
    assert anonymous <= refused, [r for r in records if r["conn"] in anonymous - refused][:5]
    tls = [r for r in records if r["type"] == "connection" and r["event"] == "tls"]
    assert tls and all(r["outcome"] == "success" and r["tls_version"] for r in tls)
    by_principal = {r["principal"]: r["cert_subject"] for r in tls}
    assert by_principal["User:payments.java-app"] == "CN=java-app,OU=payments,O=Acme"


def test_second_tenant_ca_is_accepted(mtls: GatewayProcess, pki: Pki) -> None:
    conf = {"bootstrap.servers": bootstrap(mtls), **pki.confluent("b-app", pki.tenant_b)}
    md = AdminClient(conf).list_topics(timeout=20)
    assert set(md.brokers) == {1, 2, 3}
    assert all(b.host == "localhost" for b in md.brokers.values())
    assert any(e["principal"] == "User:orders.b-app" for e in events(mtls, "tls_established"))


def test_private_keys_never_reach_the_log(mtls: GatewayProcess, pki: Pki) -> None:
    log = mtls.log_path.read_text()
    assert "PRIVATE KEY" not in log
    for key in pki.root.glob("*/issued/*.key"):
        body = "".join(key.read_text().splitlines()[1:-1])
        assert body[:40] not in log
