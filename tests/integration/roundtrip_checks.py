"""What the client round trips (``test_roundtrip_*``) check, and the helpers they share.

Acceptance: real, unmodified clients do a full round trip bootstrapped only at the gateway.

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

import itertools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.devstack.gateway_proc import GatewayProcess

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


class GroupListening:
    """A rebalance listener's two callbacks, noting them in the group's log (mixed into
    each client's own listener base class)."""

    def __init__(self, log: GroupLog, member: int) -> None:
        self.log, self.member = log, member

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.log.revoked(self.member, [tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.log.assigned(self.member, [tp.partition for tp in assigned])


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
