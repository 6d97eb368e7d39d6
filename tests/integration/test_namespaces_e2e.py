"""Transparent namespaces end to end (issue 19): a real gateway with SASL PLAIN,
authorization, quotas and ``namespaces:`` in front of the 3-node cluster; tenants made
with ``kgw tenant create --namespace transparent``; confluent-kafka, kafka-python,
aiokafka and Kafka's Java tools use plain names (``orders``, group ``billing``,
``transactional.id=tx-1``) and the cluster holds ``<tenant>.orders``. Two tenants with
the same names stay apart; a regex subscription sees only its tenant's topics; a
prefixed tenant switched to transparent names sees its existing data under plain
names."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, sasl_listener

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).resolve().parents[2] / "policies"
RUN = uuid.uuid4().hex[:5]
A, B, C = f"na{RUN}", f"nb{RUN}", f"nc{RUN}"


class Stack:
    def __init__(self, gateway: GatewayProcess, work: Path) -> None:
        self.gateway = gateway
        self.work = work

    def kgw(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", "tenant", *args,
             "--config", str(self.gateway.config_path)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def create(self, tenant: str, names: str) -> None:
        bundle = str(self.work / f"bundle-{tenant}")
        done = self.kgw("create", tenant, "--plan", "starter", "--bundle-dir", bundle,
                        "--namespace", names, "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr

    def bundle(self, tenant: str) -> Path:
        return self.work / f"bundle-{tenant}"

    def confluent(self, tenant: str) -> dict[str, Any]:
        conf: dict[str, Any] = json.loads(
            (self.bundle(tenant) / "confluent-kafka.json").read_text()
        )
        return conf

    def kafka_python(self, tenant: str) -> dict[str, Any]:
        conf: dict[str, Any] = json.loads((self.bundle(tenant) / "kafka-python.json").read_text())
        return conf


@pytest.fixture(scope="module")
def stack(gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    work = tmp_path_factory.mktemp("namespaces")
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("# managed by kgw tenant\n")
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        sasl={
            "mechanisms": ["PLAIN"],
            "credential_store": {"file": str(work / "credentials.json")},
            "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1},
        },
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={
            "store_file": str(work / "quotas.json"),
            "settings_refresh_s": 0.5,
            "plans": {"starter": {"max_topics": 10, "max_partitions_per_topic": 6}},
        },
        namespaces={"listeners": ["tenants"]},
    )
    stack = Stack(gateway, work)
    stack.create(A, "transparent")
    stack.create(B, "transparent")
    stack.create(C, "prefixed")
    time.sleep(1.0)  # the gateways' tenant watch polls every 0.25 s
    return stack


def create_topic(conf: dict[str, Any], name: str, partitions: int = 3) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)


def listed(conf: dict[str, Any]) -> set[str]:
    return set(AdminClient(conf).list_topics(timeout=20).topics)


def cluster_topics(cluster: KafkaCluster) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return set(admin.list_topics(timeout=20).topics)


def consume(conf: dict[str, Any], topics: list[str], group: str, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return values


def test_bundle_examples_use_plain_names(stack: Stack) -> None:
    readme = (stack.bundle(A) / "README.md").read_text()
    assert "--topic orders" in readme and f"{A}.orders" not in readme
    assert json.loads((stack.bundle(A) / "bundle.json").read_text())["names"] == "transparent"
    assert f"--topic {C}.orders" in (stack.bundle(C) / "README.md").read_text()


def test_two_tenants_create_orders_and_each_sees_its_own(
    stack: Stack, kafka_cluster: KafkaCluster
) -> None:
    for tenant in (A, B):
        create_topic(stack.confluent(tenant), "orders")
    create_topic(stack.confluent(A), "payments")
    on_cluster = cluster_topics(kafka_cluster)
    assert {f"{A}.orders", f"{B}.orders", f"{A}.payments"} <= on_cluster
    assert "orders" not in on_cluster
    assert listed(stack.confluent(A)) == {"orders", "payments"}
    assert listed(stack.confluent(B)) == {"orders"}
    # another tenant's topic by its cluster-side name is just a name inside one's own
    described = AdminClient(stack.confluent(B)).list_topics(f"{A}.payments", timeout=20)
    assert f"{A}.payments" not in {t for t, m in described.topics.items() if m.error is None}
    assert f"{B}.{A}.payments" not in cluster_topics(kafka_cluster)


def test_groups_with_the_same_name_stay_separate(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    for tenant in (A, B):
        producer = Producer({**stack.confluent(tenant), "acks": "all"})
        for i in range(5):
            producer.produce("orders", value=f"{tenant}-{i}".encode())
        assert producer.flush(30) == 0
    seen_a = consume(stack.confluent(A), ["orders"], "billing", 5)
    seen_b = consume(stack.confluent(B), ["orders"], "billing", 5)
    assert sorted(seen_a) == [f"{A}-{i}".encode() for i in range(5)]
    assert sorted(seen_b) == [f"{B}-{i}".encode() for i in range(5)]
    direct = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    groups = {g.group_id for g in direct.list_consumer_groups().result(30).valid}
    assert {f"{A}.billing", f"{B}.billing"} <= groups and "billing" not in groups
    admin = AdminClient(stack.confluent(A))  # kept alive until the result is in
    listing = admin.list_consumer_groups().result(30)
    mine = {g.group_id for g in listing.valid}
    assert "billing" in mine and not any(g.startswith((A, B)) for g in mine), listing.errors


def test_regex_subscription_sees_only_own_topics(stack: Stack) -> None:
    conf = stack.confluent(B)
    consumer = Consumer({**conf, "group.id": "regex", "auto.offset.reset": "earliest"})
    consumer.subscribe(["^.*"])
    assigned: set[str] = set()
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        consumer.poll(0.5)
        assigned = {tp.topic for tp in consumer.assignment()}
        if assigned:
            break
    consumer.close()
    assert assigned == {"orders"}


def test_transactional_id_tx1_in_two_tenants_commits_in_both(stack: Stack) -> None:
    producers = {t: Producer({**stack.confluent(t), "transactional.id": "tx-1"}) for t in (A, B)}
    for producer in producers.values():
        producer.init_transactions(30)
    for producer in producers.values():
        producer.begin_transaction()
    for tenant, producer in producers.items():
        producer.produce("orders", value=f"tx-{tenant}".encode())
    for producer in producers.values():
        producer.commit_transaction(30)  # neither fenced the other
    for tenant in (A, B):
        conf = {**stack.confluent(tenant), "isolation.level": "read_committed"}
        values = consume(conf, ["orders"], "tx-readers", 6)
        assert f"tx-{tenant}".encode() in values


def test_kafka_python_and_aiokafka_with_plain_names(stack: Stack) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = stack.kafka_python(A)
    producer = KafkaProducer(acks="all", **conf)
    producer.send("payments", b"from-kafka-python").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "payments", group_id="kp", auto_offset_reset="earliest", consumer_timeout_ms=20000,
        **conf,
    )  # fmt: skip
    assert b"from-kafka-python" in [m.value for m in consumer]
    consumer.close()
    assert asyncio.run(_aiokafka_roundtrip(conf)) == b"from-aiokafka"


async def _aiokafka_roundtrip(conf: dict[str, Any]) -> bytes | None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    common = {
        "bootstrap_servers": conf["bootstrap_servers"],
        "security_protocol": conf["security_protocol"],
        "sasl_mechanism": conf["sasl_mechanism"],
        "sasl_plain_username": conf["sasl_plain_username"],
        "sasl_plain_password": conf["sasl_plain_password"],
    }
    producer = AIOKafkaProducer(acks="all", **common)
    await producer.start()
    try:
        await producer.send_and_wait("payments", b"from-aiokafka")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("payments", group_id="aio", auto_offset_reset="earliest", **common)
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            async for message in consumer:
                if message.value == b"from-aiokafka":
                    return message.value
    finally:
        await consumer.stop()
    return None


def test_switching_names_moves_no_data(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    create_topic(stack.confluent(C), f"{C}.legacy", 1)
    producer = Producer({**stack.confluent(C), "acks": "all"})
    producer.produce(f"{C}.legacy", value=b"before")
    assert producer.flush(30) == 0
    switched = stack.kgw("names", C, "transparent")
    assert switched.returncode == 0, switched.stderr
    deadline = time.monotonic() + 10
    while "legacy" not in listed(stack.confluent(C)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert listed(stack.confluent(C)) == {"legacy"}
    assert consume(stack.confluent(C), ["legacy"], "after", 1) == [b"before"]
    assert f"{C}.legacy" in cluster_topics(kafka_cluster)
    assert stack.kgw("names", C, "prefixed").returncode == 0


def test_java_tools_with_plain_names(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    props = str(stack.bundle(A) / "client.properties")
    bootstrap = stack.gateway.bootstrap
    base = ["--bootstrap-server", bootstrap]

    def tool(name: str, *args: str, stdin: bytes | None = None) -> str:
        config = "--producer.config" if name == "console-producer" else (
            "--consumer.config" if name == "console-consumer" else "--command-config"
        )  # fmt: skip
        done = kafka_cluster.run_tool(name, [*base, config, props, *args], input=stdin)
        assert done.returncode == 0, (name, done.stderr.decode()[-2000:])
        return done.stdout.decode()

    tool("topics", "--create", "--topic", "java", "--partitions", "2", "--replication-factor", "3")
    assert set(tool("topics", "--list").split()) == {"orders", "payments", "java"}
    described = tool("topics", "--describe", "--topic", "java")
    assert "Topic: java" in described and A not in described
    tool("console-producer", "--topic", "java", stdin=b"one\ntwo\n")
    out = tool("console-consumer", "--topic", "java", "--from-beginning", "--max-messages", "2",
               "--group", "cli", "--timeout-ms", "30000")  # fmt: skip
    assert sorted(out.split()) == ["one", "two"]
    groups = tool("consumer-groups", "--describe", "--group", "cli")
    assert "java" in groups and A not in groups
    reset = tool("consumer-groups", "--reset-offsets", "--group", "cli", "--topic", "java",
                 "--to-earliest", "--execute")  # fmt: skip
    assert "java" in reset
    transactions = tool("transactions", "list")
    assert "tx-1" in transactions and A not in transactions and B not in transactions
    assert f"{A}.java" in cluster_topics(kafka_cluster)


def test_kafka_acls_with_plain_names(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    """``kafka-acls.sh`` as a transparent tenant: its own ACLs, in its own names; what it
    adds and removes lands inside its namespace of the gateway's policy (decision 0034,
    addendum); another tenant sees none of it."""
    policy = stack.work / "policies" / "policy.csv"

    def acls(tenant: str, *args: str) -> str:
        props = str(stack.bundle(tenant) / "client.properties")
        done = kafka_cluster.run_tool(
            "acls", ["--bootstrap-server", stack.gateway.bootstrap, "--command-config", props,
                     *args],
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        out = done.stdout.decode()
        assert "rror" not in out, out[-2000:]  # the tool prints errors and exits 0
        return out

    listing = acls(A, "--list")
    # the tenant's grants (PREFIXED "<tenant>.", all of its namespace): its wildcard
    assert "resourceType=TOPIC, name=*, patternType=LITERAL" in listing, listing
    assert "resourceType=GROUP, name=*, patternType=LITERAL" in listing, listing
    assert f"{A}." not in listing and B not in listing, listing
    assert "name=*, patternType=LITERAL" in acls(A, "--list", "--topic", "*")
    added = acls(A, "--add", "--allow-principal", "User:partner", "--operation", "Read",
                 "--topic", "orders", "--group", "billing")  # fmt: skip
    assert f"{A}." not in added, added
    deadline = time.monotonic() + 10
    while f"{A}.billing" not in policy.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    text = policy.read_text()
    assert f"User:partner, TOPIC, LITERAL, {A}.orders, READ" in text, text
    assert f"User:partner, GROUP, LITERAL, {A}.billing, READ" in text, text
    mine = acls(A, "--list", "--topic", "orders")
    assert "name=orders, patternType=LITERAL" in mine and "User:partner" in mine, mine
    theirs = acls(B, "--list")
    assert "User:partner" not in theirs and A not in theirs, theirs
    assert "User:partner" not in acls(B, "--list", "--topic", "orders")
    # B removing "everything about orders" touches only B's namespace
    acls(B, "--remove", "--force", "--topic", "orders")
    assert f"User:partner, TOPIC, LITERAL, {A}.orders, READ" in policy.read_text()
    acls(A, "--remove", "--force", "--allow-principal", "User:partner", "--operation", "Read",
         "--topic", "orders", "--group", "billing")  # fmt: skip
    assert "User:partner" not in policy.read_text()
    assert "User:partner" not in acls(A, "--list")


def test_a_hostile_tenant_reaches_nothing_of_another_by_any_spelling(
    stack: Stack, kafka_cluster: KafkaCluster
) -> None:
    """Tenant B names tenant A's topic and group every way it can think of — A's
    cluster-side name, other case, a leading dot, a regex — and gets only names inside
    its own namespace: never A's records, offsets or groups."""
    a, b = stack.confluent(A), stack.confluent(B)
    create_topic(a, "vault", 1)
    producer = Producer({**a, "acks": "all"})
    producer.produce("vault", value=b"secret-of-a")
    assert producer.flush(30) == 0
    assert consume(a, ["vault"], "keeper", 1) == [b"secret-of-a"]  # A's group commits
    spellings = [f"{A}.vault", f"{A.upper()}.vault", f".{A}.vault", f"{A}.vault."]
    consumer = Consumer({**b, "group.id": f"{A}.keeper", "auto.offset.reset": "earliest"})
    consumer.subscribe([*spellings, f"^{A}\\..*", "^.*vault.*"])
    deadline, seen = time.monotonic() + 20, []
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert b"secret-of-a" not in seen
    assert not any(A in name for name in listed(b))
    admin = AdminClient(b)
    groups = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert not any(name.startswith(A) or name == "keeper" for name in groups)
    described = admin.describe_consumer_groups(["keeper"])["keeper"].result(30)
    assert not described.members  # "keeper" is a name inside B's namespace: empty
    on_cluster = cluster_topics(kafka_cluster)
    assert f"{A}.vault" in on_cluster  # A's topic is there, and untouched
    assert not any(name.startswith(f"{A}.") and name != f"{A}.vault" and "vault" in name
                   for name in on_cluster)  # fmt: skip
