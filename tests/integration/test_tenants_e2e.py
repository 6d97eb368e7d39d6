"""Tenant onboarding end to end: ``kgw tenant create`` on a gateway with SASL PLAIN,
authorization and quotas; the bundle's settings work unchanged with confluent-kafka,
kafka-python and Kafka's Java tools inside the namespace and are refused outside it;
suspend closes a live connection within a second, resume restores access, delete
revokes the key (and deletes the data only when asked)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.config import load_config
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.tenants import onboard

from ..conftest import GatewayFactory, gateway_log_events, sasl_listener
from ..unit.tenants.conftest import stores_for
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).resolve().parents[2] / "policies"
TENANT = f"t{uuid.uuid4().hex[:6]}"


class Stack:
    def __init__(self, gateway: GatewayProcess, bundle: Path) -> None:
        self.gateway = gateway
        self.bundle = bundle
        self.created: dict[str, Any] = {}

    @property
    def config(self) -> str:
        return str(self.gateway.config_path)

    def kgw(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", "tenant", *args, "--config", self.config],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def confluent(self) -> dict[str, Any]:
        conf: dict[str, Any] = json.loads((self.bundle / "confluent-kafka.json").read_text())
        return conf

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = json.loads((self.bundle / "kafka-python.json").read_text())
        return conf


@pytest.fixture(scope="module")
def stack(gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    work = tmp_path_factory.mktemp("tenants")
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("# managed by kgw tenant\n")
    listener = sasl_listener()
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[listener],
        sasl={
            "mechanisms": ["PLAIN"],
            "credential_store": {"file": str(work / "credentials.json")},
            "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1},
        },
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={
            "store_file": str(work / "quotas.json"),
            "settings_refresh_s": 0.5,
            "plans": {"starter": {"max_topics": 4, "max_partitions_per_topic": 6}},
        },
    )
    stack = Stack(gateway, work / "bundle")
    done = stack.kgw("create", TENANT, "--plan", "starter", "--bundle-dir", str(stack.bundle),
                     "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    stack.created = json.loads(done.stdout)
    return stack


def _admin_error(conf: dict[str, Any]) -> KafkaError | None:
    """The authentication error a new connection gets (None: it worked)."""
    errors: list[KafkaError] = []
    # Expected to fail: the error comes through error_cb, and librdkafka's own log of
    # each retry (the client retries until it is freed) would only clutter the output.
    admin = AdminClient({**conf, "error_cb": errors.append, "log_level": 0})
    with contextlib.suppress(Exception):
        admin.list_topics(timeout=5)
        return None
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    return next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)


def test_bundle_is_complete_and_secret_only_in_private_files(stack: Stack) -> None:
    secret = stack.created["secret"]
    assert stack.created["prefix"] == f"{TENANT}."
    for name in ("client.properties", "confluent-kafka.json", "kafka-python.json"):
        path = stack.bundle / name
        assert secret in path.read_text() and path.stat().st_mode & 0o077 == 0, name
    assert secret not in (stack.bundle / "README.md").read_text()
    assert stack.gateway.bootstrap in (stack.bundle / "client.properties").read_text()
    assert secret not in stack.gateway.log_path.read_text()


def test_confluent_kafka_produces_and_consumes_in_its_namespace(stack: Stack) -> None:
    conf = stack.confluent()
    topic = f"{TENANT}.orders"
    admin = AdminClient(conf)  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(30):
        producer.produce(topic, value=f"c{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"{TENANT}.readers", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(values) < 30 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.add(message.value())
    consumer.close()
    assert values == {f"c{i}".encode() for i in range(30)}


def test_kafka_python_with_the_bundle(stack: Stack) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"{TENANT}.orders"
    producer = KafkaProducer(acks="all", **stack.kafka_python())
    producer.send(topic, b"from-kafka-python").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=f"{TENANT}.kp", auto_offset_reset="earliest", consumer_timeout_ms=20000,
        **stack.kafka_python(),
    )  # fmt: skip
    seen = [m.value for m in consumer]
    consumer.close()
    assert b"from-kafka-python" in seen


def test_java_tools_with_client_properties(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    props = str(stack.bundle / "client.properties")
    topic = f"{TENANT}.java"
    bootstrap = stack.gateway.bootstrap
    created = kafka_cluster.run_tool("topics", [
        "--bootstrap-server", bootstrap, "--command-config", props, "--create", "--topic", topic,
        "--partitions", "2", "--replication-factor", "3",
    ])  # fmt: skip
    assert created.returncode == 0, created.stderr.decode()[-1500:]
    produced = kafka_cluster.run_tool(
        "console-producer",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--producer.config", props],
        input=b"one\ntwo\nthree\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()[-1500:]
    consumed = kafka_cluster.run_tool("console-consumer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", "3", "--consumer.config", props, "--group", f"{TENANT}.java-cli",
        "--timeout-ms", "30000",
    ])  # fmt: skip
    assert sorted(consumed.stdout.decode().split()) == ["one", "three", "two"], (
        consumed.stderr.decode()[-1500:]
    )
    outside = kafka_cluster.run_tool("topics", [
        "--bootstrap-server", bootstrap, "--command-config", props, "--create",
        "--topic", f"x{TENANT}.java", "--partitions", "1", "--replication-factor", "3",
    ])  # fmt: skip
    assert outside.returncode != 0
    assert "TopicAuthorizationException" in outside.stderr.decode() + outside.stdout.decode()


def test_refused_outside_its_namespace(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    foreign = f"other-{uuid.uuid4().hex[:6]}"
    direct = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    direct.create_topics([NewTopic(foreign, 1, 3)])[foreign].result(30)
    conf = stack.confluent()
    failures: list[KafkaError] = []
    producer = Producer({**conf, "acks": "all", "message.timeout.ms": 10000})
    producer.produce(foreign, b"x", on_delivery=lambda err, _m: failures.append(err))
    producer.flush(20)
    assert failures and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient(conf)
    future = admin.create_topics([NewTopic(f"zz{TENANT}.x", 1, 3)])[f"zz{TENANT}.x"]
    with pytest.raises(Exception) as refused:
        future.result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    big = f"{TENANT}.big"  # inside the namespace, beyond the plan (6 partitions per topic)
    with pytest.raises(Exception) as over:
        admin.create_topics([NewTopic(big, 12, 3)])[big].result(30)
    assert over.value.args[0].code() == KafkaError.POLICY_VIOLATION
    topics = admin.list_topics(timeout=10).topics
    assert foreign not in topics  # not even visible
    assert f"{TENANT}.orders" in topics


async def _authenticated(stack: Stack) -> RawConnection:
    conn = await RawConnection.open(stack.gateway.bootstrap)
    hs = await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert hs.error_code == 0
    token = b"\0" + stack.created["api_key"].encode() + b"\0" + stack.created["secret"].encode()
    auth = await conn.request(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
    assert auth.error_code == 0, auth.error_message
    metadata = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    answer = await conn.request(metadata, MetadataResponse)
    assert answer.brokers
    return conn


def test_suspend_closes_a_live_connection_within_a_second_then_resume(stack: Stack) -> None:
    config = load_config(stack.gateway.config_path)

    async def scenario() -> float:
        conn = await _authenticated(stack)
        stores = stores_for(config)
        started = time.monotonic()
        await onboard.set_state(stores, TENANT, "suspended", actor="test")
        closed = await conn.closed_by_peer(3.0)
        elapsed = time.monotonic() - started
        conn.close()
        await stores.credentials.close()
        assert closed, "the suspended tenant's connection stayed open"
        return elapsed

    elapsed = asyncio.run(scenario())
    assert elapsed < 1.0, f"closed after {elapsed:.2f}s"
    closes = gateway_log_events(stack.gateway, "connection_closed")
    assert any("suspended" in str(e.get("reason")) for e in closes)

    refused = _admin_error(stack.confluent())
    assert refused is not None, "a suspended tenant authenticated"
    shown = stack.kgw("list", "--json")
    assert {t["name"]: t["state"] for t in json.loads(shown.stdout)}[TENANT] == "suspended"

    resumed = stack.kgw("resume", TENANT)
    assert resumed.returncode == 0, resumed.stderr
    time.sleep(0.6)  # one poll of the tenant store
    assert _admin_error(stack.confluent()) is None
    producer = Producer({**stack.confluent(), "acks": "all"})
    producer.produce(f"{TENANT}.orders", b"after-resume")
    assert producer.flush(30) == 0


def test_delete_revokes_the_key_and_keeps_or_deletes_data(
    stack: Stack, kafka_cluster: KafkaCluster
) -> None:
    deleted = stack.kgw("delete", TENANT)
    assert deleted.returncode == 0, deleted.stderr
    assert stack.created["api_key"] in deleted.stdout
    assert f"kept data: topics {TENANT}.java, {TENANT}.orders" in deleted.stdout
    time.sleep(0.6)
    assert _admin_error(stack.confluent()) is not None
    direct = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    assert f"{TENANT}.orders" in direct.list_topics(timeout=10).topics  # data kept
    policy = (Path(stack.config).parent / "gateway.yaml").read_text()
    assert "policy_dir" in policy
    rules = load_config(stack.gateway.config_path).authorization
    assert rules is not None
    assert f"tenant-{TENANT}" not in (rules.policy_dir / "policy.csv").read_text()

    # a second tenant, deleted with its data
    other = f"{TENANT}b"
    bundle = stack.bundle.with_name("bundle-b")
    made = stack.kgw("create", other, "--plan", "starter", "--bundle-dir", str(bundle))
    assert made.returncode == 0, made.stderr
    conf = json.loads((bundle / "confluent-kafka.json").read_text())
    topic = f"{other}.data"
    time.sleep(0.6)  # the policy poll
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    gone = stack.kgw("delete", other, "--delete-data")
    assert gone.returncode == 0, gone.stderr
    assert f"deleted topics: {topic}" in gone.stdout
    deadline = time.monotonic() + 20
    while topic in direct.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.5)
    assert topic not in direct.list_topics(timeout=10).topics
    assert f"{TENANT}.orders" in direct.list_topics(timeout=10).topics  # the other tenant's data
