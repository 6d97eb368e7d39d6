"""Acceptance with Kafka's own Java tools: the full round trip through the gateway that
``roundtrip_checks`` describes and verifies."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.conftest import assert_only_gateway_addresses
from tests.integration.roundtrip_checks import (
    FINISH_S,
    GROUP_FORM_S,
    KEYS,
    LEAVE_AFTER,
    LEAVER,
    MEMBERS,
    PARTITIONS,
    RECORDS,
    REPLICAS,
    SURVIVORS,
    GroupLog,
    Record,
    assert_broker_ports,
    assert_committed,
    next_offsets,
    verify_group,
    wait_until,
)

pytestmark = pytest.mark.integration

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
