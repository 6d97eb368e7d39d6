"""KIP-848 regex subscriptions through the gateway, on a real cluster whose brokers run an
authorizer and see each tenant as its own principal (decision 0026).

A transparent tenant's ``subscribed_topic_regex`` is re-emitted in the syntax RE2J,
java.util.regex and Python read alike and confined as ``<prefix>(?:R)``
(``gateway/saferegex.py``); the gateway authorizes it on the pattern's literal prefix;
the brokers resolve it with RE2J and keep only topics the member's principal may
DESCRIBE (``GroupMetadataManager.filterTopicDescribeAuthorizedTopics``). Real KIP-848
clients: confluent-kafka (``group.protocol=consumer``) and Kafka's console consumer
(``--include``); hostile patterns over the raw protocol."""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta

from gateway.devstack.gateway_proc import GatewayProcess

from .broker_enforced import EnforcedStack, Tenant, make_cluster
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
TOPICS = {"a": ["orders", "payments"], "b": ["orders", "other.orders"]}


class KipStack(EnforcedStack):
    """The enforced stack with transparent namespaces on the tenants' listener."""

    def config(self, gateway_checks: bool) -> dict[str, Any]:
        return super().config(gateway_checks) | {"namespaces": {"listeners": ["tenants"]}}

    def names(self, tenant: Tenant, mode: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "tenant", "names", tenant.name, mode,
             "--config", str(self.gateway.config_path)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def kip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KipStack]:
    cluster, password = make_cluster(tmp_path_factory.mktemp("kafka-kip848"))
    cluster.start()
    stack = KipStack(cluster, tmp_path_factory.mktemp("kip848"), password)
    try:
        stack.start_gateway(gateway_checks=True)
        run = uuid.uuid4().hex[:5]
        a, b, c = (stack.onboard(f"k{x}{run}") for x in "abc")
        stack.names(a, "transparent")
        stack.names(b, "transparent")  # c stays prefixed
        time.sleep(1.0)  # the tenant watch
        for tenant, key in ((a, "a"), (b, "b")):
            admin = AdminClient(tenant.client())
            futures = admin.create_topics([NewTopic(t, 2, 1) for t in TOPICS[key]])
            for future in futures.values():
                future.result(30)
            producer = Producer({**tenant.client(), "acks": "all"})
            for topic in TOPICS[key]:
                producer.produce(topic, value=f"{key}:{topic}".encode())
            assert producer.flush(90) == 0
        admin = AdminClient(c.client())
        admin.create_topics([NewTopic(f"{c.prefix}logs", 1, 1)])[f"{c.prefix}logs"].result(30)
        producer = Producer({**c.client(), "acks": "all"})
        producer.produce(f"{c.prefix}logs", value=b"c:logs")
        assert producer.flush(90) == 0
        yield stack
    finally:
        stack.stop()
        cluster.stop()


def regex_consume(
    conf: dict[str, Any], pattern: str, count: int, group_prefix: str = ""
) -> tuple[set[str], list[str]]:
    """(assigned topics, values) of a KIP-848 consumer subscribed to ``pattern``."""
    group = f"{group_prefix}rx-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({**conf, "group.protocol": "consumer", "group.id": group,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([pattern])
    values: list[str] = []
    errors: list[str] = []
    assigned: set[str] = set()
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and len(values) < count:
            message = consumer.poll(0.5)
            assigned |= {tp.topic for tp in consumer.assignment()}
            if message is not None and message.error() is None:
                values.append(message.value().decode())
            elif message is not None:
                errors.append(str(message.error()))
        end = time.monotonic() + 5  # anything more that would come, comes now
        while time.monotonic() < end:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
    finally:
        consumer.close()
    if not assigned:
        print(f"{pattern!r}: nothing assigned; errors {errors[:5]}")
    return assigned, values


def test_regex_dot_star_sees_only_the_tenants_own_topics(kip: KipStack) -> None:
    a, b, _ = kip.tenants
    assigned_a, values_a = regex_consume(a.client(), "^.*", 2)
    assert assigned_a == {"orders", "payments"} and sorted(values_a) == ["a:orders", "a:payments"]
    assigned_b, values_b = regex_consume(b.client(), "^.*", 2)
    assert assigned_b == {"orders", "other.orders"}
    assert sorted(values_b) == ["b:orders", "b:other.orders"]
    # the cluster holds the group under the prefix, its regex confined there
    admin = kip.admin()  # referenced until the result is in
    listing = admin.list_consumer_groups().result(30)
    groups = {g.group_id for g in listing.valid}
    assert any(g.startswith(a.prefix + "rx-") for g in groups), (groups, listing.errors)
    assert not any(g.startswith("rx-") for g in groups), groups


def test_alternation_toward_another_tenant_stays_inside(kip: KipStack) -> None:
    a, b, _ = kip.tenants
    # "other.orders" and a's cluster-side names are names inside b's own namespace
    pattern = f"^orders|{a.prefix}orders|other\\..*"  # librdkafka: a regex starts with ^
    assigned, values = regex_consume(b.client(), pattern, 2)
    assert assigned == {"orders", "other.orders"}
    assert sorted(values) == ["b:orders", "b:other.orders"]


def test_java_console_consumer_include(kip: KipStack) -> None:
    a, _, _ = kip.tenants
    props = kip.workdir / f"bundle-{a.name}" / "client.properties"
    done = kip.cluster.run_tool("console-consumer", [
        "--bootstrap-server", a.bootstrap, "--consumer.config", str(props),
        "--consumer-property", "group.protocol=consumer", "--group", "java-rx",
        "--include", "pay.*|ord.*", "--from-beginning", "--max-messages", "2",
        "--timeout-ms", "60000",
    ])  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert sorted(done.stdout.decode().split()) == ["a:orders", "a:payments"]


async def heartbeat(tenant: Tenant, group: str, pattern: str) -> ConsumerGroupHeartbeatResponse:
    connection = await RawConnection.open_plain(tenant.bootstrap, tenant.username, tenant.secret)
    try:
        request = ConsumerGroupHeartbeatRequest(
            group_id=GroupId(group), member_id=str(uuid.uuid4()), member_epoch=i32(0),
            instance_id=None, rack_id=None,
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=None, subscribed_topic_regex=pattern,
            server_assignor=None, topic_partitions=(),
        )  # fmt: skip
        return await connection.request(request, ConsumerGroupHeartbeatResponse)
    finally:
        connection.close()


HOSTILE = [")|(.*", "a)|(.*", "\\Q).*|(\\E", "(?i)ORDERS", "(?s).*", "[[:alpha:](])|.*|(]",
           "[a&&[^b]]|.*", "(?=x).*", ".*+", "\\p{L}.*", "\uff4frders", "a{,3}"]  # fmt: skip


@pytest.mark.parametrize("pattern", HOSTILE)
def test_hostile_regexes_are_refused_as_invalid(kip: KipStack, pattern: str) -> None:
    a, _, _ = kip.tenants
    answer = asyncio.run(heartbeat(a, "hostile", pattern))
    assert answer.error_code == 128, answer  # INVALID_REGULAR_EXPRESSION, nothing joined


def test_prefixed_tenant_regex_must_start_with_its_prefix(kip: KipStack) -> None:
    _, _, c = kip.tenants
    refused = asyncio.run(heartbeat(c, f"{c.prefix}g", ".*"))
    assert refused.error_code == 29 and "prefix" in (refused.error_message or "")
    escaped = c.prefix.replace(".", "\\.")
    assigned, values = regex_consume(c.client(), f"^{escaped}.*", 1, c.prefix)
    assert assigned == {f"{c.prefix}logs"} and values == ["c:logs"]


def test_brokers_filter_regex_matches_by_the_tenants_describe_acls(kip: KipStack) -> None:
    """With the gateway's checks off, a prefixed tenant's ``.*`` reaches the brokers as
    written; they resolve it against every topic and keep those the tenant's principal
    may DESCRIBE: its own only."""
    _, _, c = kip.tenants
    brokers_only: GatewayProcess = kip.start_gateway(gateway_checks=False)
    conf = c.client(**{"bootstrap.servers": EnforcedStack.sasl_bootstrap_of(brokers_only)})
    assigned, values = regex_consume(conf, "^.*", 1, c.prefix)
    assert assigned == {f"{c.prefix}logs"} and values == ["c:logs"]


def test_operator_regex_sees_cluster_side_names(kip: KipStack) -> None:
    """On the gateway's operators' listener (a super user, no namespace) a regex spans
    tenants, in cluster-side names."""
    a, b, _ = kip.tenants
    local = kip.gateway.config["listeners"][0]
    conf = {"bootstrap.servers": f"{local['advertised_host']}:{local['bootstrap_port']}"}
    escaped = [t.prefix.replace(".", "\\.") for t in (a, b)]
    assigned, _ = regex_consume(conf, f"^({escaped[0]}|{escaped[1]}).*", 4)
    assert assigned == {f"{a.prefix}orders", f"{a.prefix}payments", f"{b.prefix}orders",
                        f"{b.prefix}other.orders"}  # fmt: skip


def test_classic_group_assignments_are_cluster_side_names_on_the_brokers(kip: KipStack) -> None:
    """A classic-protocol consumer of a transparent tenant: the brokers hold its
    subscription and assignment in cluster-side names (an operator's describe shows
    ``<prefix>orders``); the tenant's own describe shows ``orders``."""
    a, _, _ = kip.tenants
    consumer = Consumer({**a.client(), "group.protocol": "classic", "group.id": "classic",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["orders"])
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert {tp.topic for tp in consumer.assignment()} == {"orders"}
        admin = kip.admin()
        [described] = admin.describe_consumer_groups([f"{a.prefix}classic"]).values()
        members = described.result(30).members
        on_cluster = {tp.topic for m in members for tp in m.assignment.topic_partitions}
        assert on_cluster == {f"{a.prefix}orders"}
        mine = AdminClient(a.client())
        [seen] = mine.describe_consumer_groups(["classic"]).values()
        shown = {tp.topic for m in seen.result(30).members for tp in m.assignment.topic_partitions}
        assert shown == {"orders"}
    finally:
        consumer.close()


def test_online_migration_from_classic_to_kip848(kip: KipStack) -> None:
    """A KIP-848 member joins a transparent tenant's live classic group: the brokers
    convert the group, reading the classic member's subscription (cluster-side names)
    and splitting ``orders`` between the two members."""
    a, _, _ = kip.tenants
    conf = {**a.client(), "group.id": "migrating", "auto.offset.reset": "earliest"}
    classic = Consumer({**conf, "group.protocol": "classic"})
    classic.subscribe(["orders"])
    modern = Consumer({**conf, "group.protocol": "consumer"})
    try:
        deadline = time.monotonic() + 60
        while not classic.assignment() and time.monotonic() < deadline:
            classic.poll(0.5)
        assert {tp.topic for tp in classic.assignment()} == {"orders"}
        modern.subscribe(["orders"])
        split: tuple[set[Any], set[Any]] = (set(), set())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            classic.poll(0.2)
            modern.poll(0.2)
            split = ({(tp.topic, tp.partition) for tp in classic.assignment()},
                     {(tp.topic, tp.partition) for tp in modern.assignment()})  # fmt: skip
            if split[0] and split[1]:
                break
        assert split[0] and split[1], split
        assert split[0] | split[1] == {("orders", 0), ("orders", 1)} and not split[0] & split[1]
    finally:
        modern.close()
        classic.close()
