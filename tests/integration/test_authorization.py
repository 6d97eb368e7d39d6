"""Authorization end to end: two tenants, real clients, the real cluster.

Principals come from per-listener configuration here (tenant A's listener,
tenant B's listener, an admin listener); TLS and SASL supply them in production.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, gateway_log_events

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).parents[2] / "policies"
POLICY = [
    "p, User:a-app, TOPIC, PREFIXED, tenant-a., ALL, *, allow",
    "p, User:a-app, GROUP, PREFIXED, tenant-a., ALL, *, allow",
    "p, User:b-app, TOPIC, PREFIXED, tenant-b., ALL, *, allow",
    "p, User:b-app, GROUP, PREFIXED, tenant-b., ALL, *, allow",
    "p, User:admin, CLUSTER, LITERAL, kafka-cluster, ALTER, *, allow",
    "p, User:admin, CLUSTER, LITERAL, kafka-cluster, DESCRIBE, *, allow",
]


class Stack:
    def __init__(self, gateway: GatewayProcess, policy_file: Path) -> None:
        self.gateway = gateway
        self.policy_file = policy_file
        listeners = {lst["name"]: lst for lst in gateway.config["listeners"]}
        self.a = f"127.0.0.1:{listeners['tenant-a']['bootstrap_port']}"
        self.b = f"127.0.0.1:{listeners['tenant-b']['bootstrap_port']}"
        self.admin = f"127.0.0.1:{listeners['admin']['bootstrap_port']}"


def _listener(name: str, principal: str) -> dict[str, Any]:
    bootstrap, base = pick_ports()
    return {
        "name": name, "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
        "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
        "principal": principal,
    }  # fmt: skip


@pytest.fixture(scope="module")
def stack(gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    policy_dir = tmp_path_factory.mktemp("policies")
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("\n".join(POLICY) + "\n")
    gateway = gateway_factory(
        listeners=[
            _listener("tenant-a", "User:a-app"),
            _listener("tenant-b", "User:b-app"),
            _listener("admin", "User:admin"),
        ],
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
    )
    return Stack(gateway, policy_dir / "policy.csv")


def _create(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(30)


def _produce(bootstrap: str, topic: str, count: int) -> list[KafkaError | None]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000}
    )
    results: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, _m: results.append(e))
    producer.flush(30)
    return results


def _consumer(bootstrap: str, group: str) -> Consumer:
    # A subscribed topic's authorization error surfaces on a metadata refresh: refresh
    # often, so a loaded machine does not turn the wait into a timeout.
    return Consumer({
        "topic.metadata.refresh.interval.ms": 1000,
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip


def _first_error(consumer: Consumer, seconds: float) -> KafkaError | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            err: KafkaError = message.error()
            if err.code() != KafkaError._PARTITION_EOF:
                return err
    return None


def test_each_tenant_uses_its_own_namespace(stack: Stack) -> None:
    _create(stack.a, "tenant-a.orders")
    _create(stack.b, "tenant-b.orders")
    assert _produce(stack.a, "tenant-a.orders", 50) == [None] * 50
    assert _produce(stack.b, "tenant-b.orders", 50) == [None] * 50
    consumer = _consumer(stack.a, "tenant-a.readers")
    consumer.subscribe(["tenant-a.orders"])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == 50


def test_tenant_a_cannot_touch_tenant_b(stack: Stack) -> None:
    _create(stack.b, "tenant-b.private")
    before = len(gateway_log_events(stack.gateway, "authorization_denied"))

    # write
    errors = _produce(stack.a, "tenant-b.private", 3)
    assert errors and all(
        e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors
    )
    # create and delete
    admin = AdminClient({"bootstrap.servers": stack.a})
    with pytest.raises(KafkaException) as created:
        admin.create_topics([NewTopic("tenant-b.sneaky", 1, 3)])["tenant-b.sneaky"].result(30)
    assert created.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as deleted:
        admin.delete_topics(["tenant-b.private"])["tenant-b.private"].result(30)
    assert deleted.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # describe: listing leaves tenant B's topics out; naming one is refused
    topics = set(admin.list_topics(timeout=10).topics)
    assert "tenant-b.private" not in topics and not any(t.startswith("tenant-b.") for t in topics)
    named = admin.list_topics(topic="tenant-b.private", timeout=10).topics["tenant-b.private"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # read, with a group of its own
    consumer = _consumer(stack.a, "tenant-a.spy")
    consumer.subscribe(["tenant-b.private"])
    err = _first_error(consumer, 60)
    consumer.close()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # commit into tenant B's group
    consumer = _consumer(stack.a, "tenant-b.readers")
    consumer.subscribe(["tenant-a.orders"])
    err = _first_error(consumer, 60)
    consumer.close()
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    denials = gateway_log_events(stack.gateway, "authorization_denied")[before:]
    assert denials and all(d["principal"] == "User:a-app" for d in denials)


def test_policy_edit_cuts_a_streaming_consumer_within_a_second(stack: Stack) -> None:
    _create(stack.a, "tenant-a.stream")
    _produce(stack.a, "tenant-a.stream", 20)
    consumer = _consumer(stack.a, "tenant-a.streamers")
    consumer.subscribe(["tenant-a.stream"])
    got = 0
    deadline = time.monotonic() + 60
    while got < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == 20
    original = stack.policy_file.read_text()
    try:
        edited = original.replace(
            "p, User:a-app, TOPIC, PREFIXED, tenant-a., ALL, *, allow\n",
            "p, User:a-app, TOPIC, PREFIXED, tenant-a., ALL, *, allow\n"
            "p, User:a-app, TOPIC, LITERAL, tenant-a.stream, READ, *, deny\n",
        )
        stack.policy_file.write_text(edited)
        edited_at = time.monotonic()
        err = _first_error(consumer, 10)
        cut_after = time.monotonic() - edited_at
    finally:
        stack.policy_file.write_text(original)
        consumer.close()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # librdkafka long-polls fetches (fetch.wait.max.ms 500): the cut must land within one
    # second of the edit plus that wait.
    assert cut_after < 1.0 + 0.5 + 0.5, cut_after


def test_kafka_acls_through_the_gateway(stack: Stack, kafka_cluster: KafkaCluster) -> None:
    _create(stack.b, "tenant-b.shared")
    assert _produce(stack.a, "tenant-b.shared", 1)[0] is not None  # not yet
    added = kafka_cluster.run_tool("acls", [
        "--bootstrap-server", stack.admin, "--add", "--allow-principal", "User:a-app",
        "--operation", "Write", "--topic", "tenant-b.shared",
    ])  # fmt: skip
    assert added.returncode == 0, added.stderr.decode()[-2000:]
    listed = kafka_cluster.run_tool("acls", ["--bootstrap-server", stack.admin, "--list"])
    assert listed.returncode == 0, listed.stderr.decode()[-2000:]
    assert "User:a-app" in listed.stdout.decode() and "tenant-b.shared" in listed.stdout.decode()
    assert "tenant-b.shared" in stack.policy_file.read_text()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if _produce(stack.a, "tenant-b.shared", 1) == [None]:
            break
    assert _produce(stack.a, "tenant-b.shared", 5) == [None] * 5
    refused = kafka_cluster.run_tool("acls", [
        "--bootstrap-server", stack.a, "--add", "--allow-principal", "User:a-app",
        "--operation", "All", "--topic", "*",
    ])  # fmt: skip
    assert refused.returncode != 0 or "ClusterAuthorization" in refused.stdout.decode()
