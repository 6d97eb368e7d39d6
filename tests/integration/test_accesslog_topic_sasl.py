"""The access log's topic sink logs in with the gateway's upstream SASL identity
(``upstream.sasl``), like all the gateway's broker traffic (decision 0027): a real
one-node Kafka cluster whose only listener is SASL_PLAINTEXT (SCRAM-SHA-512), with the
gateway's login generated here. Without the login, or with a wrong password, nothing
reaches the topic and the failure is counted, naming no secret."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.accesslog import AccessLog, build_access_log
from gateway.accesslog.settings import AccessLogConfig, AccessLogTopicConfig
from gateway.accesslog.sink import SinkError
from gateway.accesslog.topic import TopicSink
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.upstream.client import BrokerClient
from gateway.upstream.identity import UpstreamIdentity
from gateway.upstream.settings import UpstreamSaslConfig

from ..conftest import gateway_log_events

pytestmark = pytest.mark.integration
USER = "kgw-gateway"


@pytest.fixture(scope="module")
def password() -> str:
    return secrets.token_hex(16)


@pytest.fixture(scope="module")
def sasl_cluster(password: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka-sasl-accesslog"), nodes=1, heap="384m",
        security_protocol="SASL_PLAINTEXT", sasl_mechanisms=("SCRAM-SHA-512",),
        sasl_users={USER: password},
    )  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _password_file(directory: Path, password: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "upstream.pass"
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return path


def _sasl(directory: Path, password: str) -> UpstreamSaslConfig:
    return UpstreamSaslConfig(
        mechanism="SCRAM-SHA-512", username=USER,
        password_file=_password_file(directory, password), timeout_s=5,
    )  # fmt: skip


def _create_topic(cluster: KafkaCluster, partitions: int = 3) -> str:
    topic = f"kgw.access.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **cluster.client_config})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    return topic


def _consume(
    cluster: KafkaCluster, topic: str, done: Callable[[list[Any]], bool], seconds: float = 60
) -> list[Any]:
    """The topic's records as JSON, read directly from the cluster as its ``admin`` user,
    until ``done(records)`` or ``seconds`` have passed."""
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, **cluster.client_config,
        "group.id": f"check-{uuid.uuid4()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    values: list[Any] = []
    deadline = time.monotonic() + seconds
    try:
        while not done(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(json.loads(message.value()))
    finally:
        consumer.close()
    return values


def _access_log(cluster: KafkaCluster, topic: str, identity: UpstreamIdentity | None) -> AccessLog:
    """The access log as the gateway builds it: its topic sink on the gateway's client."""
    client = BrokerClient(list(cluster.brokers.values()), identity=identity, timeout_s=10)
    config = AccessLogConfig(
        path=None, queue_size=10_000, report_interval_s=3600,
        topic=AccessLogTopicConfig(name=topic, timeout_s=5, batch_max_bytes=4096),
    )  # fmt: skip
    access = build_access_log(config, client)
    assert access is not None
    return access


async def _write_all(access: AccessLog, entries: list[dict[str, Any]]) -> None:
    writer = asyncio.create_task(access.run())
    for entry in entries:
        access.record(entry)
    await access.close(timeout_s=60)
    await writer


def test_the_sink_logs_in_as_the_gateway(
    sasl_cluster: KafkaCluster, password: str, tmp_path: Path
) -> None:
    topic = _create_topic(sasl_cluster)
    sent = [{"v": 1, "type": "request", "n": i, "pad": "x" * 50} for i in range(300)]

    anonymous = _access_log(sasl_cluster, topic, None)  # no login: the broker hangs up
    asyncio.run(_write_all(anonymous, sent[:10]))
    assert anonymous.stats()["topic"].dropped == {"sink_error": 10}

    identity = UpstreamIdentity.load(_sasl(tmp_path, password))
    access = _access_log(sasl_cluster, topic, identity)
    asyncio.run(_write_all(access, sent))
    assert access.dropped_total == 0
    assert access.stats()["topic"].written == 300
    received = _consume(sasl_cluster, topic, lambda got: len(got) >= 300)
    received.sort(key=lambda e: int(e["n"]))
    assert received == sent  # and not one of the ten written without a login


def test_a_refused_login_fails_the_batch_without_the_secret(
    sasl_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = _create_topic(sasl_cluster, partitions=1)
    wrong = secrets.token_hex(16)
    identity = UpstreamIdentity.load(_sasl(tmp_path, wrong))
    client = BrokerClient(list(sasl_cluster.brokers.values()), identity=identity, timeout_s=10)
    sink = TopicSink(topic, client, timeout_s=5)

    async def write() -> None:
        try:
            await sink.write([{"n": 1}])
        finally:
            await sink.close()

    with pytest.raises(SinkError) as failed:
        asyncio.run(write())
    assert f"metadata for topic {topic!r} unavailable" in failed.value.reason
    assert "credentials" in failed.value.reason  # the broker's refusal, in words
    assert wrong not in failed.value.reason


def test_a_gateway_with_upstream_sasl_logs_requests_to_the_topic(
    sasl_cluster: KafkaCluster, password: str, tmp_path: Path
) -> None:
    """The wiring: ``kgw serve`` with ``upstream.sasl`` and ``accesslog.topic``."""
    access_topic = _create_topic(sasl_cluster)
    data_topic = f"data-{uuid.uuid4().hex[:8]}"
    bootstrap, base = pick_ports()
    config = dev_config(
        sasl_cluster.bootstrap_servers, bootstrap, base,
        accesslog={"path": None, "report_interval_s": 1, "topic": {"name": access_topic}},
    )  # fmt: skip
    config["upstream"]["sasl"] = {
        "mechanism": "SCRAM-SHA-512", "username": USER, "timeout_s": 5,
        "password_file": str(_password_file(tmp_path / "gw", password)),
    }  # fmt: skip
    gateway = GatewayProcess(tmp_path / "gw", config)
    gateway.start(expected_brokers=1)
    try:
        through = {"bootstrap.servers": gateway.bootstrap}
        admin = AdminClient(through)  # referenced until the result is in
        admin.create_topics([NewTopic(data_topic, 1, 1)])[data_topic].result(30)
        producer = Producer({**through, "client.id": "accesslog-sasl", "acks": "all"})
        for i in range(5):
            producer.produce(data_topic, value=f"record-{i}".encode())
        assert producer.flush(30) == 0

        def ours(records: list[Any]) -> list[Any]:  # (topics are named with authorization on)
            return [
                r for r in records
                if r.get("api") == "produce" and r.get("client_id") == "accesslog-sasl"
            ]  # fmt: skip

        produced = ours(_consume(sasl_cluster, access_topic, ours))
        assert produced, gateway.log_tail()
        assert produced[0]["decision"] == "none" and produced[0]["error_code"] == 0
        assert not gateway_log_events(gateway, "accesslog_sink_failed")
    finally:
        gateway.stop()
    assert password not in gateway.log_path.read_text()
