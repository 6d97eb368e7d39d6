"""SNI mode: one TLS port serves the whole 3-node cluster; the broker is chosen by the
server name (``b<N>.kafka.test``) and metadata carries those names.

The names resolve to 127.0.0.1 per client, without touching the machine's resolver:
a Python ``ssl`` client connects to 127.0.0.1 and sends the name as SNI; kafka-python
gets a ``socket.getaddrinfo`` that maps ``*.kafka.test`` to 127.0.0.1; Kafka's Java
tools get a hosts file (``-Djdk.net.hosts.file``). librdkafka (confluent-kafka) has
no such hook in Python, so it is not used here.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..rawkafka import RawConnection
from .conftest import Pki, StartTls, events, kgw_certs, tls_listener, tls_section, wait_for_event

pytestmark = pytest.mark.integration

NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def sni(start_tls_gateway: StartTls, pki: Pki) -> GatewayProcess:
    listener = tls_listener(tls_section(pki), advertised_host="kafka.test", name="sni",
                           sni={"broker_host": "b{node_id}.kafka.test"})  # fmt: skip
    del listener["broker_port_base"]
    return start_tls_gateway(listener)


@pytest.fixture(scope="module")
def placed_topic(kafka_cluster: KafkaCluster) -> str:
    """Partition p led by broker p + 1 (set up directly on the cluster)."""
    name = "sni-placed"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 3, replica_assignment=[[1], [2], [3]])])[name].result(30)
    return name


def port(gw: GatewayProcess) -> int:
    return int(gw.listener["bootstrap_port"])


async def open_sni(gw: GatewayProcess, pki: Pki, name: str) -> RawConnection:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port(gw), ssl=pki.context("healthy"), server_hostname=name
    )
    return RawConnection(reader, writer)


async def list_offsets_codes(gw: GatewayProcess, pki: Pki, node: int, topic: str) -> dict[int, int]:
    """Error code per partition of ListOffsets sent on a connection named b<node>."""
    conn = await open_sni(gw, pki, f"b{node}.kafka.test")
    request = ListOffsetsRequest(
        replica_id=BrokerId(-1), isolation_level=i8(0),
        topics=(ListOffsetsTopic(name=TopicName(topic), partitions=tuple(
            ListOffsetsPartition(partition_index=i32(p), timestamp=i64(-1)) for p in range(3))),),
    )  # fmt: skip
    try:
        response = await conn.request(request, ListOffsetsResponse)
    finally:
        conn.close()
    return {int(p.partition_index): int(p.error_code) for p in response.topics[0].partitions}


def test_one_port_serves_each_broker_by_name(
    sni: GatewayProcess, pki: Pki, placed_topic: str
) -> None:
    async def run() -> None:
        conn = await open_sni(sni, pki, "kafka.test")
        md = await conn.request(
            MetadataRequest(topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False),
            MetadataResponse,
        )  # fmt: skip
        conn.close()
        assert {(b.node_id, b.host, b.port) for b in md.brokers} == {
            (n, f"b{n}.kafka.test", port(sni)) for n in (1, 2, 3)
        }
        for node in (1, 2, 3):
            expected = {p: 0 if p + 1 == node else NOT_LEADER_OR_FOLLOWER for p in range(3)}
            deadline = time.monotonic() + 20  # a new topic's leaders settle first
            while (codes := await list_offsets_codes(sni, pki, node, placed_topic)) != expected:
                assert time.monotonic() < deadline, f"b{node} reached another broker: {codes}"
                await asyncio.sleep(0.5)

    asyncio.run(run())
    routed = {e.get("node_id") for e in events(sni, "tls_established") if e.get("sni")}
    assert {1, 2, 3} <= routed


def test_unknown_server_name_is_refused(sni: GatewayProcess, pki: Pki) -> None:
    since = len(events(sni, "tls_handshake_failed"))
    with (
        socket.create_connection(("127.0.0.1", port(sni)), timeout=5) as sock,
        pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"),
    ):
        pki.context("healthy").wrap_socket(sock, server_hostname="b1.evil.test")
    record = wait_for_event(sni, "tls_handshake_failed", since)
    assert record["reason"] == "unknown_sni" and "b1.evil.test" in record["msg"]


@pytest.fixture
def resolve_kafka_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and (host == "kafka.test" or host.endswith(".kafka.test")):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield


def test_kafka_python_through_sni(
    sni: GatewayProcess, pki: Pki, placed_topic: str, resolve_kafka_test: None
) -> None:
    ssl_args: dict[str, Any] = {
        "bootstrap_servers": f"kafka.test:{port(sni)}",
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.gateway.cert_path),
        "ssl_certfile": str(pki.cert(pki.tenant_a, "kpy-app")),
        "ssl_keyfile": str(pki.key(pki.tenant_a, "kpy-app")),
    }
    producer = KafkaProducer(acks="all", **ssl_args)
    for i in range(90):
        producer.send(placed_topic, f"kp-{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(placed_topic, group_id="sni-kp", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **ssl_args)  # fmt: skip
    seen = set()
    for record in consumer:
        seen.add(record.value.decode())
        if len(seen) == 90:
            break
    consumer.close()
    assert seen >= {f"kp-{i}" for i in range(90)}
    names = {e.get("sni") for e in events(sni, "tls_established")}
    assert {"kafka.test", "b1.kafka.test", "b2.kafka.test", "b3.kafka.test"} <= names


def test_java_tools_through_sni(
    sni: GatewayProcess, pki: Pki, kafka_cluster: KafkaCluster, placed_topic: str, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts"
    names = ("kafka.test", "b1.kafka.test", "b2.kafka.test", "b3.kafka.test")
    hosts.write_text("".join(f"127.0.0.1 {name}\n" for name in names))
    keystore, key_pw = tmp_path / "java.p12", tmp_path / "java.pass"
    kgw_certs(pki.root, "export", "tenant-a", "java-app", "--out", str(keystore),
              "--password-file", str(key_pw))  # fmt: skip
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SSL\nssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={keystore}\nssl.keystore.password={key_pw.read_text().strip()}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.gateway.cert_path}\n"
    )

    def java(tool: str, args: list[str], stdin: bytes | None = None) -> str:
        argv = kafka_dist.jvm_argv(
            kafka_cluster.libs, kafka_dist.tool_main_class(tool), args,
            jvm_opts=[f"-Djdk.net.hosts.file={hosts}"],
        )  # fmt: skip
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=180, check=False)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
        return proc.stdout.decode()

    topic = "sni-java"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1], [2], [3]])])[topic].result(30)
    bootstrap = f"kafka.test:{port(sni)}"
    lines = "".join(f"java-{i}\n" for i in range(60)).encode()
    java("console-producer", ["--bootstrap-server", bootstrap, "--topic", topic,
                              "--producer.config", str(props)], lines)  # fmt: skip
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
            "--max-messages", "60", "--timeout-ms", "60000",
            "--consumer.config", str(props)]  # fmt: skip
    out = java("console-consumer", args)
    assert {f"java-{i}" for i in range(60)} <= set(out.split())
    principals = {e["principal"] for e in events(sni, "tls_established")}
    assert "User:payments.java-app" in principals
