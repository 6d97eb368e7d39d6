"""Acceptance: real, unmodified clients do a full round trip bootstrapped only at the gateway.

For each of confluent-kafka, kafka-python, aiokafka and Kafka's own Java tools:

1. create a topic with 6 partitions and replication factor 3 through the gateway, with the
   client's admin API (TopicCommand for Java);
2. start a consumer group of three members and wait until each member holds two partitions
   (and the coordinator, asked through the gateway, counts three members);
3. produce 100,000 keyed records with acks=all, every value unique;
4. one member processes at least ``LEAVE_AFTER`` records, commits and leaves the group; the two
   others are rebalanced onto its partitions and finish the work.

Every member processes a batch and commits exactly that batch's offsets synchronously before it
polls again. Under that discipline Kafka delivers a record a second time only when the commit
of the batch that carried it failed (a rebalance raced the commit). So the tests assert:

- the delivered values are exactly the acknowledged values (nothing lost, nothing foreign);
- no value was delivered in two batches whose commits both succeeded (no duplicate within
  committed progress); extra deliveries from failed-commit batches are counted, not hidden;
- every record arrives with the key it was produced with, and each key maps to one partition;
- each partition the leaver held is resumed by a survivor exactly at the offset the group had
  committed for it when the member left;
- both survivors were assigned partitions after the leave and together hold all six;
- the group's committed offsets, read back through the gateway, equal the log-end offsets;
- every broker address the client was handed (Metadata, DescribeCluster, FindCoordinator, and
  the connections it made) is a gateway address.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.abc import ConsumerRebalanceListener as AioRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import TopicPartition as CfTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener as KpRebalanceListener
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.conftest import assert_only_gateway_addresses

pytestmark = pytest.mark.integration

RECORDS = 100_000
PARTITIONS = 6
REPLICAS = 3
MEMBERS = 3
LEAVER = 0
SURVIVORS = [m for m in range(MEMBERS) if m != LEAVER]
LEAVE_AFTER = 5_000
KEYS = 1_000
BATCH = 500
GROUP_FORM_S = 90.0
FINISH_S = 240.0

Record = tuple[int, int, str, str]  # partition, offset, key, value


# -- what a consumer group did, and what must be true of it ------------------------------


@dataclass
class Delivery:
    seq: int
    member: int
    partition: int
    offset: int
    key: str
    value: str
    batch: int


@dataclass
class Commit:
    seq: int
    member: int
    batch: int
    offsets: dict[int, int]  # partition -> next offset to read
    ok: bool
    error: str


@dataclass
class GroupLog:
    """The events of one consumer group, in the order they happened (``seq``)."""

    deliveries: list[Delivery] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    assignments: list[tuple[int, int, frozenset[int]]] = field(default_factory=list)
    current: dict[int, frozenset[int]] = field(default_factory=dict)
    left_at: dict[int, int] = field(default_factory=dict)
    consumed: Counter[int] = field(default_factory=Counter)
    values: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: Iterator[int] = field(default_factory=itertools.count)
    _batches: Iterator[int] = field(default_factory=itertools.count)

    def assigned(self, member: int, partitions: Iterable[int]) -> None:
        with self._lock:
            now = self.current.get(member, frozenset()) | frozenset(partitions)
            self.current[member] = now
            self.assignments.append((next(self._seq), member, now))

    def revoked(self, member: int, partitions: Iterable[int]) -> None:
        with self._lock:
            self.current[member] = self.current.get(member, frozenset()) - frozenset(partitions)
            next(self._seq)

    def batch(self, member: int, records: list[Record]) -> int:
        with self._lock:
            batch = next(self._batches)
            for partition, offset, key, value in records:
                self.deliveries.append(
                    Delivery(next(self._seq), member, partition, offset, key, value, batch)
                )
                self.values.add(value)
            self.consumed[member] += len(records)
            return batch

    def commit(self, member: int, batch: int, offsets: dict[int, int], error: str = "") -> None:
        with self._lock:
            self.commits.append(Commit(next(self._seq), member, batch, offsets, not error, error))

    def leave(self, member: int) -> None:
        with self._lock:
            self.left_at[member] = next(self._seq)

    def stable(self, members: int) -> bool:
        """Every member holds an equal, disjoint share and together they hold every partition."""
        with self._lock:
            shares = [self.current.get(m, frozenset()) for m in range(members)]
        covered = frozenset().union(*shares)
        return (
            all(len(s) == PARTITIONS // members for s in shares)
            and covered == frozenset(range(PARTITIONS))
            and sum(map(len, shares)) == PARTITIONS
        )

    def shares(self, members: Iterable[int]) -> list[frozenset[int]]:
        with self._lock:
            return [self.current.get(m, frozenset()) for m in members]

    def describe(self) -> str:
        with self._lock:
            return (
                f"assignments={dict(self.current)} consumed={dict(self.consumed)} "
                f"distinct={len(self.values)} left={self.left_at}"
            )


def next_offsets(records: list[Record]) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for partition, offset, _, _ in records:
        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
    return offsets


def verify_group(
    log: GroupLog,
    acked: set[str],
    key_of: Callable[[str], str],
    final: list[frozenset[int]],
    leaver: int = LEAVER,
) -> dict[str, int]:
    """Assert the delivery guarantees in the module docstring; returns counts for the report.

    ``final`` is what the survivors held once the work was done (before they were stopped).
    """
    delivered = Counter(d.value for d in log.deliveries)
    missing, foreign = acked - delivered.keys(), delivered.keys() - acked
    assert not missing, f"{len(missing)} acknowledged records never consumed: {sorted(missing)[:5]}"
    assert not foreign, f"{len(foreign)} consumed values never acknowledged: {sorted(foreign)[:5]}"

    ok_batches = {c.batch for c in log.commits if c.ok}
    failed = [c for c in log.commits if not c.ok]
    in_committed = Counter(d.value for d in log.deliveries if d.batch in ok_batches)
    twice = {v: n for v, n in in_committed.items() if n > 1}
    assert not twice, (
        f"{len(twice)} records delivered in more than one successfully committed batch "
        f"(duplicates within committed progress), e.g. {sorted(twice.items())[:5]}"
    )
    uncommitted = {d.value for d in log.deliveries if d.batch not in ok_batches}
    assert uncommitted <= acked
    redelivered = sum(delivered.values()) - len(delivered)

    wrong_keys = [(d.key, d.value) for d in log.deliveries if d.key != key_of(d.value)]
    assert not wrong_keys, f"records arrived with the wrong key: {wrong_keys[:5]}"
    key_partitions: defaultdict[str, set[int]] = defaultdict(set)
    for d in log.deliveries:
        key_partitions[d.key].add(d.partition)
    split = {k: p for k, p in key_partitions.items() if len(p) > 1}
    assert not split, f"keys spread over several partitions: {list(split.items())[:5]}"

    assert leaver in log.left_at, f"member {leaver} never left the group"
    left = log.left_at[leaver]
    assert log.consumed[leaver] >= LEAVE_AFTER, log.describe()
    held = _assignment_at(log, leaver, left)
    assert len(held) == PARTITIONS // MEMBERS, f"member {leaver} held {held} when it left"
    for partition in sorted(held):
        committed = max(
            (
                c.offsets[partition]
                for c in log.commits
                if c.ok and c.seq < left and partition in c.offsets
            ),
            default=0,
        )
        after = [d for d in log.deliveries if d.partition == partition and d.seq > left]
        assert after, f"nobody consumed partition {partition} after member {leaver} left"
        assert {d.member for d in after} <= set(range(MEMBERS)) - {leaver}
        resumed = min(d.offset for d in after)
        assert resumed == committed, (
            f"partition {partition} resumed at offset {resumed} after the leave, "
            f"but the group had committed {committed}"
        )
    survivors = [m for m in range(MEMBERS) if m != leaver]
    for member in survivors:
        assert any(seq > left and m == member for seq, m, _ in log.assignments), (
            f"member {member} was never rebalanced after member {leaver} left: {log.describe()}"
        )
    assert len(final) == len(survivors)
    assert sum(map(len, final)) == PARTITIONS, f"overlapping assignments: {final}"
    assert frozenset().union(*final) == frozenset(range(PARTITIONS)), final
    return {
        "deliveries": len(log.deliveries),
        "redelivered": redelivered,
        "failed_commits": len(failed),
        "leaver_consumed": log.consumed[leaver],
    }


def _assignment_at(log: GroupLog, member: int, seq: int) -> frozenset[int]:
    held: frozenset[int] = frozenset()
    for at, m, partitions in log.assignments:
        if m == member and at < seq:
            held = partitions
    return held


# -- small helpers ---------------------------------------------------------------------------


def wait_until(condition: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what()}")
        time.sleep(0.2)


def record(prefix: str, i: int) -> tuple[str, str]:
    return f"key-{i % KEYS}", f"{prefix}-{i:06d}"


def prefixed_key(value: str) -> str:
    return f"key-{int(value.rsplit('-', 1)[1]) % KEYS}"


def gateway_addresses(gateway: GatewayProcess) -> set[str]:
    host = gateway.listener["advertised_host"]
    return {gateway.bootstrap} | {f"{host}:{gateway.public_port(n)}" for n in range(17)}


def assert_broker_ports(brokers: dict[int, str], gateway: GatewayProcess) -> None:
    """Each broker id is advertised on its own port: ``broker_port_base + id``."""
    host = gateway.listener["advertised_host"]
    expected = {n: f"{host}:{gateway.public_port(n)}" for n in brokers}
    assert brokers == expected


def assert_committed(committed: dict[int, int], ends: dict[int, int]) -> None:
    assert set(ends) == set(range(PARTITIONS))
    assert sum(ends.values()) == RECORDS, f"log-end offsets {ends} do not add up to {RECORDS}"
    assert committed == ends, f"committed {committed} != log-end {ends}"


@dataclass
class ThreadedGroup:
    """How one client library takes part in the scenario; the driver does the rest."""

    member: Callable[[int, GroupLog, threading.Event], None]  # runs until stopped or it leaves
    produce: Callable[[], set[str]]  # the acknowledged values
    committed: Callable[[], dict[int, int]]  # the group's committed offsets, per partition
    ends: Callable[[], dict[int, int]]  # log-end offsets, per partition
    members: Callable[[], int]  # group members as the coordinator counts them


def run_threaded_group(kit: ThreadedGroup) -> tuple[GroupLog, set[str], list[frozenset[int]]]:
    """Form the group, produce, let the leaver go, wait for the survivors to commit everything.

    Returns the group's log, the acknowledged values and the survivors' final assignments.
    """
    log, stop = GroupLog(), threading.Event()
    failures: list[BaseException] = []

    def run(member: int) -> None:
        try:
            kit.member(member, log, stop)
        except BaseException as exc:  # reported by the test thread, which asserts on it
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(m,), name=f"member-{m}") for m in range(MEMBERS)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: log.stable(MEMBERS) or bool(failures), GROUP_FORM_S, log.describe)
        assert not failures, failures
        assert kit.members() == MEMBERS
        acked = kit.produce()
        assert len(acked) == RECORDS

        def finished() -> bool:
            if failures or not acked <= log.values:
                return bool(failures)
            return kit.committed() == kit.ends()

        wait_until(finished, FINISH_S, lambda: f"the survivors to finish: {log.describe()}")
        final = log.shares(SURVIVORS)
        assert not failures, failures
        assert_committed(kit.committed(), kit.ends())
        assert kit.members() == MEMBERS - 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failures, failures
    return log, acked, final


def leaving(log: GroupLog, member: int) -> bool:
    """True (and noted in the log) once the leaver has processed its share."""
    if member == LEAVER and log.consumed[member] >= LEAVE_AFTER:
        log.leave(member)
        return True
    return False


# -- confluent-kafka --------------------------------------------------------------------------


class ConfluentAddresses:
    """Broker addresses librdkafka learned (from its statistics), by kind."""

    def __init__(self) -> None:
        self.learned: set[str] = set()
        self.configured: set[str] = set()
        self._lock = threading.Lock()

    def on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        with self._lock:
            for broker in stats.get("brokers", {}).values():
                name = broker.get("nodename") or ""
                if not name:
                    continue
                target = self.configured if broker.get("source") == "configured" else self.learned
                target.add(name)


def cf_config(bootstrap: str, addresses: ConfluentAddresses, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "statistics.interval.ms": 1000,
        "stats_cb": addresses.on_stats,
        **more,
    }


def cf_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: threading.Event,
    addresses: ConfluentAddresses,
) -> None:
    consumer = Consumer(
        cf_config(
            bootstrap,
            addresses,
            **{
                "group.id": group,
                "client.id": f"{group}-m{member}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            },
        )
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, parts: log.assigned(member, [p.partition for p in parts]),
        on_revoke=lambda _c, parts: log.revoked(member, [p.partition for p in parts]),
    )
    try:
        while not stop.is_set():
            records = []
            for msg in consumer.consume(BATCH, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                records.append(_cf_record(msg))
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            tps = [CfTopicPartition(topic, p, o) for p, o in offsets.items()]
            try:
                done = consumer.commit(offsets=tps, asynchronous=False)
                errors = [str(tp.error) for tp in done or [] if tp.error is not None]
                log.commit(member, batch, offsets, "; ".join(errors))
            except KafkaException as exc:
                log.commit(member, batch, offsets, str(exc) or "commit failed")
            if leaving(log, member):
                break
    finally:
        consumer.close()


def _cf_record(msg: Message) -> Record:
    key, value = msg.key(), msg.value()
    assert key is not None and value is not None
    return msg.partition(), msg.offset(), key.decode(), value.decode()


def cf_produce(bootstrap: str, topic: str, addresses: ConfluentAddresses) -> set[str]:
    acked: set[str] = set()
    errors: list[ConfluentError] = []

    def on_delivery(err: ConfluentError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            value = msg.value()
            assert value is not None
            acked.add(value.decode())

    producer = Producer(cf_config(bootstrap, addresses, acks="all", **{"linger.ms": 20}))
    for i in range(RECORDS):
        key, value = record("cf", i)
        while True:
            try:
                producer.produce(topic, value.encode(), key.encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0, "records still undelivered 120 s after the last produce"
    assert errors == [], f"{len(errors)} delivery errors, first: {errors[:3]}"
    return acked


def test_confluent_kafka_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    addresses = ConfluentAddresses()
    admin = AdminClient(cf_config(bootstrap, addresses))
    admin.create_topics([NewTopic(topic, PARTITIONS, REPLICAS)])[topic].result(60)

    def topic_ready() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        return (
            meta.error is None
            and len(meta.partitions) == PARTITIONS
            and all(len(p.replicas) == REPLICAS for p in meta.partitions.values())
        )

    wait_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS}x{REPLICAS} replicas")
    meta = admin.list_topics(timeout=30)
    assert_broker_ports({b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}, gateway)
    cluster = admin.describe_cluster().result(30)
    described = {n.id: f"{n.host}:{n.port}" for n in cluster.nodes}
    assert_broker_ports(described, gateway)
    seen = set(described.values()) | {f"{b.host}:{b.port}" for b in meta.brokers.values()}

    group = f"cf-{uuid.uuid4().hex[:8]}"

    def members() -> int:
        info = admin.describe_consumer_groups([group])[group].result(30)
        seen.add(f"{info.coordinator.host}:{info.coordinator.port}")
        return len(info.members)

    log, acked, final = run_threaded_group(
        ThreadedGroup(
            member=lambda m, log, stop: cf_member(bootstrap, topic, group, m, log, stop, addresses),
            produce=lambda: cf_produce(bootstrap, topic, addresses),
            committed=lambda: _cf_committed(admin, group, topic),
            ends=lambda: _cf_ends(admin, topic),
            members=members,
        )
    )
    report = verify_group(log, acked, prefixed_key, final)
    print(f"confluent-kafka group: {report}")

    assert addresses.learned, "librdkafka reported no broker statistics"
    assert addresses.configured <= {bootstrap}, addresses.configured
    assert addresses.learned <= gateway_addresses(gateway), addresses.learned
    assert_only_gateway_addresses(seen | addresses.learned, gateway, kafka_cluster)


def _cf_committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [CfTopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _cf_ends(admin: AdminClient, topic: str) -> dict[int, int]:
    specs = {CfTopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(specs).items()}


# -- kafka-python ---------------------------------------------------------------------------


class KpListener(KpRebalanceListener):  # type: ignore[misc]
    def __init__(self, log: GroupLog, member: int) -> None:
        self.log, self.member = log, member

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.log.revoked(self.member, [tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.log.assigned(self.member, [tp.partition for tp in assigned])


def kp_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: threading.Event,
    seen: set[str],
) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"{group}-m{member}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=30_000,
        max_poll_records=BATCH,
    )
    consumer.subscribe([topic], listener=KpListener(log, member))
    try:
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=500)
            records = [
                (r.partition, r.offset, r.key.decode(), r.value.decode())
                for batch in polled.values()
                for r in batch
            ]
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            commit = {
                KpTopicPartition(topic, p): KpOffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
            try:
                consumer.commit(commit)
                log.commit(member, batch, offsets)
            except KpKafkaError as exc:
                log.commit(member, batch, offsets, repr(exc))
            if leaving(log, member):
                break
    finally:
        seen.update(_kp_addresses(consumer._client.cluster))
        coordinator = consumer._client.cluster.broker_metadata(consumer._coordinator.coordinator_id)
        if coordinator is not None:
            seen.add(f"{coordinator.host}:{coordinator.port}")
        consumer.close()


def _kp_addresses(cluster: Any) -> set[str]:
    return {f"{b.host}:{b.port}" for b in cluster.brokers()}


def kp_produce(bootstrap: str, topic: str, seen: set[str]) -> set[str]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024
    )
    try:
        futures = []
        for i in range(RECORDS):
            key, value = record("kp", i)
            futures.append((value, producer.send(topic, key=key.encode(), value=value.encode())))
        producer.flush(timeout=180)
        failed = [(v, f.exception) for v, f in futures if not f.succeeded()]
        assert not failed, f"{len(failed)} records not acknowledged, first: {failed[:3]}"
        seen.update(_kp_addresses(producer._metadata))
    finally:
        producer.close(timeout=30)
    return {value for value, _ in futures}


def test_kafka_python_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        created = admin.create_topics([KpNewTopic(topic, PARTITIONS, REPLICAS)])
        assert [t["error_code"] for t in created["topics"]] == [0], created

        def topic_ready() -> bool:
            (described,) = admin.describe_topics([topic])
            parts = described["partitions"]
            return (
                described["error_code"] == 0
                and len(parts) == PARTITIONS
                and all(len(p["replica_nodes"]) == REPLICAS for p in parts)
            )

        wait_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS}x{REPLICAS}")
        cluster = admin.describe_cluster()
        described = {b["broker_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
        assert_broker_ports(described, gateway)
        metadata = {b.node_id: f"{b.host}:{b.port}" for b in admin._client.cluster.brokers()}
        assert_broker_ports(metadata, gateway)
        seen = set(described.values()) | set(metadata.values())

        group = f"kp-{uuid.uuid4().hex[:8]}"
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]

        def committed() -> dict[int, int]:
            offsets = admin.list_group_offsets({group: None})[group]
            return {tp.partition: meta.offset for tp, meta in offsets.items()}

        def ends() -> dict[int, int]:
            return {tp.partition: o for tp, o in offsets_reader.end_offsets(tps).items()}

        offsets_reader = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kp-offsets")
        try:
            log, acked, final = run_threaded_group(
                ThreadedGroup(
                    member=lambda m, log, stop: kp_member(
                        bootstrap, topic, group, m, log, stop, seen
                    ),
                    produce=lambda: kp_produce(bootstrap, topic, seen),
                    committed=committed,
                    ends=ends,
                    members=lambda: len(admin.describe_groups([group])[group]["members"]),
                )
            )
        finally:
            offsets_reader.close()
    finally:
        admin.close()
    report = verify_group(log, acked, prefixed_key, final)
    print(f"kafka-python group: {report}")
    assert_only_gateway_addresses(seen, gateway, kafka_cluster)


# -- aiokafka -------------------------------------------------------------------------------


class AioListener(AioRebalanceListener):  # type: ignore[misc]
    def __init__(self, log: GroupLog, member: int) -> None:
        self.log, self.member = log, member

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.log.revoked(self.member, [tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.log.assigned(self.member, [tp.partition for tp in assigned])


def _aio_addresses(client: Any) -> set[str]:
    """Brokers in the client's metadata, and every connection it opened."""
    brokers = {f"{b.host}:{b.port}" for b in client.cluster.brokers()}
    return brokers | {f"{conn.host}:{conn.port}" for conn in client._conns.values()}


async def aio_member(
    bootstrap: str,
    topic: str,
    group: str,
    member: int,
    log: GroupLog,
    stop: asyncio.Event,
    seen: set[str],
) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"{group}-m{member}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=30_000,
    )
    consumer.subscribe([topic], listener=AioListener(log, member))
    await consumer.start()
    try:
        while not stop.is_set():
            polled = await consumer.getmany(timeout_ms=500, max_records=BATCH)
            records = [
                (r.partition, r.offset, r.key.decode(), r.value.decode())
                for batch in polled.values()
                for r in batch
            ]
            seen.update(_aio_addresses(consumer._client))
            if not records:
                continue
            batch = log.batch(member, records)
            offsets = next_offsets(records)
            try:
                await consumer.commit({AioTopicPartition(topic, p): o for p, o in offsets.items()})
                log.commit(member, batch, offsets)
            except AioKafkaError as exc:
                log.commit(member, batch, offsets, repr(exc))
            if leaving(log, member):
                break
    finally:
        await consumer.stop()


async def aio_produce(bootstrap: str, topic: str, seen: set[str]) -> set[str]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        values, futures = [], []
        for i in range(RECORDS):
            key, value = record("aio", i)
            values.append(value)
            futures.append(await producer.send(topic, key=key.encode(), value=value.encode()))
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 180)
        failed = [(v, r) for v, r in zip(values, results, strict=True) if isinstance(r, Exception)]
        assert not failed, f"{len(failed)} records not acknowledged, first: {failed[:3]}"
        seen.update(_aio_addresses(producer.client))
    finally:
        await producer.stop()
    return set(values)


async def _aio_group_members(admin: AIOKafkaAdminClient, group: str) -> int:
    (response,) = await admin.describe_consumer_groups([group])
    (described,) = response.groups
    return len(described[5] if isinstance(described, tuple) else described.members)


async def test_aiokafka_roundtrip(
    gateway: GatewayProcess, kafka_cluster: KafkaCluster, topic: str
) -> None:
    bootstrap = gateway.bootstrap
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
    await admin.start()
    offsets_reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aio-offsets")
    await offsets_reader.start()
    group = f"aio-{uuid.uuid4().hex[:8]}"
    log, stop = GroupLog(), asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    seen: set[str] = set()
    try:
        response = await admin.create_topics([AioNewTopic(topic, PARTITIONS, REPLICAS)])
        assert [e[1] for e in response.topic_errors] == [0], response

        async def topic_ready() -> bool:
            await offsets_reader._client.force_metadata_update()
            parts = offsets_reader._client.cluster.partitions_for_topic(topic) or set()
            return len(parts) == PARTITIONS

        await _async_until(topic_ready, 60, lambda: f"topic {topic} with {PARTITIONS} partitions")
        cluster = await admin.describe_cluster()
        described = {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
        assert_broker_ports(described, gateway)
        seen |= set(described.values()) | _aio_addresses(admin._client)

        tasks = [
            asyncio.create_task(aio_member(bootstrap, topic, group, m, log, stop, seen))
            for m in range(MEMBERS)
        ]

        def failed() -> bool:
            return any(t.done() and (t.cancelled() or t.exception()) for t in tasks)

        await _async_until(lambda: log.stable(MEMBERS) or failed(), GROUP_FORM_S, log.describe)
        assert not failed(), [t.exception() for t in tasks if t.done()]
        assert await _aio_group_members(admin, group) == MEMBERS

        acked = await aio_produce(bootstrap, topic, seen)
        assert len(acked) == RECORDS
        tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]

        async def committed() -> dict[int, int]:
            offsets = await admin.list_consumer_group_offsets(group)
            return {tp.partition: meta.offset for tp, meta in offsets.items()}

        async def ends() -> dict[int, int]:
            return {tp.partition: o for tp, o in (await offsets_reader.end_offsets(tps)).items()}

        async def finished() -> bool:
            if failed() or not acked <= log.values:
                return failed()
            return await committed() == await ends()

        await _async_until(finished, FINISH_S, lambda: f"the survivors to finish: {log.describe()}")
        final = log.shares(SURVIVORS)
        assert not failed(), [t.exception() for t in tasks if t.done()]
        assert_committed(await committed(), await ends())
        assert await _aio_group_members(admin, group) == MEMBERS - 1
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await offsets_reader.stop()
        await admin.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    report = verify_group(log, acked, prefixed_key, final)
    print(f"aiokafka group: {report}")
    assert_only_gateway_addresses(seen - {bootstrap}, gateway, kafka_cluster)
    assert seen <= gateway_addresses(gateway), seen


async def _async_until(
    condition: Callable[[], bool | Awaitable[bool]], within: float, what: Callable[[], str]
) -> None:
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if await result if inspect.isawaitable(result) else result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what()}")
        await asyncio.sleep(0.3)


# -- Kafka's Java tools -----------------------------------------------------------------------


def run_java(cluster: KafkaCluster, tool: str, args: list[str], timeout: float = 180) -> str:
    done = cluster.run_tool(tool, args, timeout=timeout)
    assert done.returncode == 0, (
        f"{tool} {' '.join(args)} exited {done.returncode}:\n"
        f"{done.stderr.decode(errors='replace')[-3000:]}"
    )
    return done.stdout.decode(errors="replace")


class JavaMember:
    """A VerifiableConsumer process whose JSON events are read back from its stdout file."""

    def __init__(self, cluster: KafkaCluster, workdir: Path, member: int, args: list[str]) -> None:
        self.member = member
        self.out_path = workdir / f"member-{member}.out"
        self.err_path = workdir / f"member-{member}.err"
        self._events: list[dict[str, Any]] = []
        self._read = 0  # bytes of the stdout file already parsed
        self._held: set[int] = set()
        self._values: set[str] = set()
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(
                cluster.tool_argv("verifiable-consumer", args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )

    def events(self) -> list[dict[str, Any]]:
        """Every complete event line written so far (parsed once, incrementally)."""
        with self.out_path.open("rb") as out:
            out.seek(self._read)
            chunk = out.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._read += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            self._events.append(event)
            parts = {p["partition"] for p in event.get("partitions", ())}
            if event["name"] == "partitions_assigned":
                self._held |= parts
            elif event["name"] == "partitions_revoked":
                self._held -= parts
            elif event["name"] == "record_data":
                self._values.add(event["value"])
        return self._events

    def current(self) -> frozenset[int]:
        self.events()
        return frozenset(self._held)

    def values(self) -> set[str]:
        self.events()
        return self._values

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-3000:]

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


def java_group_log(members: list[JavaMember]) -> GroupLog:
    """Merge the members' event streams by timestamp into one ordered ``GroupLog``.

    A member's records since its previous ``offsets_committed`` event form one batch; the
    leaver leaves at its last commit (``--max-messages`` then makes it close the consumer).
    Events of the same millisecond keep the leaver first, which only delays "after the leave".
    """
    log = GroupLog()
    merged = sorted(
        (event["timestamp"], m.member, line, event)
        for m in members
        for line, event in enumerate(m.events())
    )
    leaver_commits = [
        line for ts, m, line, e in merged if m == LEAVER and e["name"] == "offsets_committed"
    ]
    leave_line = max(leaver_commits, default=-1)
    pending: dict[int, list[Record]] = defaultdict(list)
    for _, member, line, event in merged:
        name = event["name"]
        parts = [p["partition"] for p in event.get("partitions", ())]
        if name == "partitions_assigned":
            log.assigned(member, parts)
        elif name == "partitions_revoked":
            log.revoked(member, parts)
        elif name == "record_data":
            pending[member].append(
                (event["partition"], event["offset"], event["key"], event["value"])
            )
        elif name == "offsets_committed" and pending[member]:
            records, pending[member] = pending[member], []
            batch = log.batch(member, records)
            offsets = {o["partition"]: o["offset"] for o in event["offsets"]}
            log.commit(member, batch, offsets, "" if event["success"] else event.get("error", "?"))
        if member == LEAVER and line == leave_line:
            log.leave(member)
    for member, records in pending.items():
        if records:  # delivered but never committed (the process was stopped)
            log.commit(member, log.batch(member, records), next_offsets(records), "not committed")
    return log


GROUP_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\d+|-)\s+(\d+)\s+(\d+|-)\s+(\S+)", re.M)


def java_offsets(cluster: KafkaCluster, bootstrap: str, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (committed, log-end) from ``kafka-consumer-groups --describe``."""
    out = run_java(
        cluster,
        "consumer-groups",
        ["--bootstrap-server", bootstrap, "--describe", "--group", group],
    )
    rows = {}
    for row in GROUP_ROW.finditer(out):
        if row[1] == group and row[4] != "-":
            rows[int(row[3])] = (int(row[4]), int(row[5]))
    return rows


def java_group_state(cluster: KafkaCluster, bootstrap: str, group: str) -> tuple[str, int]:
    """(coordinator host:port, member count) from ``kafka-consumer-groups --describe --state``."""
    args = ["--bootstrap-server", bootstrap, "--describe", "--group", group, "--state"]
    out = run_java(cluster, "consumer-groups", args)
    match = re.search(rf"^{re.escape(group)}\s+(\S+)\s+\(\d+\)\s+\S+\s+\S+\s+(\d+)\s*$", out, re.M)
    assert match, out
    return match[1], int(match[2])


def test_java_tools_roundtrip(
    gateway: GatewayProcess,
    kafka_cluster: KafkaCluster,
    topic: str,
    tmp_path: Path,
) -> None:
    bootstrap = gateway.bootstrap
    base = ["--bootstrap-server", bootstrap]
    create = ["--create", "--topic", topic, "--partitions", str(PARTITIONS)]
    run_java(kafka_cluster, "topics", [*base, *create, "--replication-factor", str(REPLICAS)])
    described = run_java(kafka_cluster, "topics", [*base, "--describe", "--topic", topic])
    assert f"PartitionCount: {PARTITIONS}" in described, described
    assert f"ReplicationFactor: {REPLICAS}" in described, described

    versions = run_java(kafka_cluster, "broker-api-versions", base)
    brokers = {int(i): a for a, i in re.findall(r"^(\S+:\d+) \(id: (\d+)", versions, re.M)}
    assert set(brokers) == set(kafka_cluster.pids), versions[:2000]
    assert_broker_ports(brokers, gateway)
    seen = set(brokers.values())

    group = f"java-{uuid.uuid4().hex[:8]}"
    consumer_args = [*base, "--topic", topic, "--group-id", group, "--verbose"]
    members = [
        JavaMember(
            kafka_cluster,
            tmp_path,
            m,
            consumer_args + (["--max-messages", str(LEAVE_AFTER)] if m == LEAVER else []),
        )
        for m in range(MEMBERS)
    ]
    try:

        def stable() -> bool:
            shares = [m.current() for m in members]
            exited = [m.member for m in members if m.proc.poll() is not None]
            assert not exited, f"members {exited} exited early: {members[exited[0]].stderr()}"
            equal = all(len(share) == PARTITIONS // MEMBERS for share in shares)
            return equal and frozenset().union(*shares) == frozenset(range(PARTITIONS))

        wait_until(stable, GROUP_FORM_S, lambda: str([m.current() for m in members]))
        coordinator, count = java_group_state(kafka_cluster, bootstrap, group)
        assert count == MEMBERS
        seen.add(coordinator)

        produce_args = ["--topic", topic, "--max-messages", str(RECORDS), "--acks", "-1"]
        produced = run_java(
            kafka_cluster, "verifiable-producer", [*base, *produce_args, "--repeating-keys", "1000"]
        )
        events = [json.loads(line) for line in produced.splitlines() if line.startswith("{")]
        acked = {e["value"] for e in events if e["name"] == "producer_send_success"}
        send_errors = [e for e in events if e["name"] == "producer_send_error"]
        assert not send_errors, send_errors[:3]
        assert acked == {str(i) for i in range(RECORDS)}

        leaver = members[LEAVER]
        assert leaver.proc.wait(120) == 0, leaver.stderr()

        def finished() -> bool:
            if not acked <= set().union(*(m.values() for m in members)):
                return False
            rows = java_offsets(kafka_cluster, bootstrap, group)
            return len(rows) == PARTITIONS and all(c == e for c, e in rows.values())

        wait_until(finished, FINISH_S, lambda: str([len(m.values()) for m in members]))
        final = [members[m].current() for m in SURVIVORS]
        rows = java_offsets(kafka_cluster, bootstrap, group)
        assert_committed({p: c for p, (c, _) in rows.items()}, {p: e for p, (_, e) in rows.items()})
        coordinator, count = java_group_state(kafka_cluster, bootstrap, group)
        assert count == MEMBERS - 1
        seen.add(coordinator)
    finally:
        codes = [m.stop() for m in members]
    assert codes[LEAVER] == 0
    for member in members:
        names = [e["name"] for e in member.events()]
        assert names.count("shutdown_complete") == 1, (member.member, names[-5:], member.stderr())
    log = java_group_log(members)
    report = verify_group(log, acked, lambda value: str(int(value) % KEYS), final)
    print(f"java tools group: {report}")
    assert_only_gateway_addresses(seen, gateway, kafka_cluster)
