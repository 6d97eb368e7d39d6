"""Two tenants on one gateway, a victim with state worth stealing, an attacker.

``start_stack(mode, ...)`` builds everything; ``Stack`` knows how to reach the
gateway as each tenant (SASL PLAIN with API keys made at test time) and how to
reach the brokers as a super user (``super_connection``), which is what the
victim-state snapshot uses.

Modes (the parametrization point of the suite, see conftest.py):

* ``gateway``: the gateway's own authorization on, the gateway's shared upstream
  identity, brokers without ACLs (super-user = a direct PLAINTEXT connection).
* ``brokers``: only the brokers decide. The gateway's checks are off
  (``authorization.gateway_checks: false``, a test switch), every tenant connection
  logs in to the brokers as the tenant's own principal (``upstream.tenant_identities``)
  and the brokers (a 3-node SASL cluster of its own running ``StandardAuthorizer``,
  tests/integration/broker_enforced.py) hold the policy mirrored as Kafka ACLs. The
  snapshot logs in to them as their super user and reads their ACLs too.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.encryption.batch import Batch, Record, encode

from ...conftest import GatewayFactory, sasl_listener
from ..broker_enforced import GATEWAY_USER, EnforcedStack, make_cluster
from ..rawkafka import RawConnection
from .kafkamsg import request

POLICIES = Path(__file__).resolve().parents[3] / "policies"
DAY_MS = 86_400_000
PLAN = {"max_topics": 20, "max_partitions_per_topic": 8, "max_total_partitions": 60,
        "max_retention_ms": DAY_MS}  # fmt: skip


@dataclass
class Tenant:
    name: str  # also the prefix of its resources: "<name>."
    principal: str
    key_id: str
    secret: str

    @property
    def prefix(self) -> str:
        return f"{self.name}."

    def conf(self, bootstrap: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": self.key_id, "sasl.password": self.secret,
        }  # fmt: skip


@dataclass
class Ctx:
    """Everything a scenario may name: the victim's resources and the attacker's own."""

    vt: str  # victim topic, 3 partitions, records with the marker
    vt_id: uuid.UUID
    vt2: str  # victim topic with a retention of its own, 1 partition
    vt2_id: uuid.UUID
    vg: str  # victim classic group: one member, committed offsets
    vg_member: str
    vg_generation: int
    vcg: str  # victim consumer group (KIP-848), empty, with committed offsets
    vtx: str  # victim transactional id, used once
    vtx_pid: int
    vtx_epoch: int
    victim_principal: str
    victim_key: str
    marker: str  # inside every victim record
    at: str  # attacker topic
    at_id: uuid.UUID
    ag: str  # attacker group, committed offsets
    acg: str  # attacker consumer group (KIP-848), used by the regex attack
    atx: str  # attacker transactional id, initialised (atx_pid, atx_epoch)
    atx_pid: int
    atx_epoch: int
    attacker_principal: str
    records: bytes  # one uncompressed record batch for the attacker's produce attempts
    leaders: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> node
    group_node: dict[str, int] = field(default_factory=dict)  # group id -> coordinator node
    txn_node: dict[str, int] = field(default_factory=dict)  # txn id -> coordinator node

    def secrets(self) -> dict[Any, str]:
        """What must never reach the attacker unless it named it itself."""
        return {
            self.vt: "victim topic", self.vt_id: "victim topic id",
            self.vt2: "victim topic 2", self.vt2_id: "victim topic 2 id",
            self.vg: "victim group", self.vg_member: "victim member id",
            self.vcg: "victim consumer group", self.vtx: "victim transactional id",
            self.victim_principal: "victim principal", self.victim_key: "victim API key id",
            self.marker: "victim record content",
        }  # fmt: skip


@dataclass
class Stack:
    mode: str
    gateway: GatewayProcess
    cluster: KafkaCluster
    victim: Tenant
    attacker: Tenant
    policy_file: Path  # the gateway's policy (the ACL store in "gateway" mode)
    quota_file: Path
    ctx: Ctx | None = None
    super_login: Callable[[RawConnection], Awaitable[None]] | None = None
    acls_on_brokers: bool = False
    close: Callable[[], None] | None = None  # what the mode started beyond the fixtures

    @property
    def listener(self) -> dict[str, Any]:
        """The tenants' (SASL) listener."""
        listeners = self.gateway.config["listeners"]
        found: dict[str, Any] = next(lst for lst in listeners if lst["name"] == "tenants")
        return found

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener['bootstrap_port']}"

    def port_of(self, node: int) -> str:
        """The gateway's public address standing for broker ``node``."""
        return f"127.0.0.1:{int(self.listener['broker_port_base']) + node}"

    async def connect(self, tenant: Tenant, node: int | None = None) -> RawConnection:
        address = self.bootstrap if node is None else self.port_of(node)
        return await RawConnection.open_plain(address, tenant.key_id, tenant.secret)

    async def super_connection(self, node: int) -> RawConnection:
        """A super-user connection straight to broker ``node`` (no gateway)."""
        host, port = self.cluster.brokers[node]
        conn = await RawConnection.open(f"{host}:{port}")
        if self.super_login is not None:
            await self.super_login(conn)
        return conn

    def nodes(self) -> list[int]:
        return sorted(self.cluster.brokers)


def _policy(*tenants: Tenant) -> list[str]:
    """Each tenant's namespace, granted to its role (``Role:tenant-<name>``, which the
    brokers' ACL sync mirrors to the tenant's upstream principal)."""
    lines = []
    for t in tenants:
        role = f"Role:tenant-{t.name}"
        lines.append(f"g, {t.principal}, {role}")
        for rtype in ("TOPIC", "GROUP", "TRANSACTIONAL_ID"):
            lines.append(f"p, {role}, {rtype}, PREFIXED, {t.prefix}, ALL, *, allow")
        lines.append(f"p, {role}, CLUSTER, LITERAL, kafka-cluster, IDEMPOTENT_WRITE, *, allow")
    return lines


def _tenants(workdir: Path) -> list[Tenant]:
    """Victim and attacker: API keys in a credential store at ``workdir``."""
    names = [f"vic{uuid.uuid4().hex[:6]}", f"atk{uuid.uuid4().hex[:6]}"]
    store = open_store(CredentialStoreConfig(file=workdir / "credentials.json"))

    async def make() -> list[Tenant]:
        made = []
        for name in names:
            principal = f"User:{name}.app"
            key, secret = await store.create_api_key(principal=principal, tenant=name, actor="test")
            made.append(Tenant(name, principal, key.key_id, secret))
        return made

    return asyncio.run(make())


def start_stack(
    mode: str, gateway_factory: GatewayFactory, cluster: KafkaCluster, workdir: Path
) -> Stack:
    assert mode in BUILDERS, f"unknown mode {mode}"
    return BUILDERS[mode](gateway_factory, cluster, workdir)


def _gateway_mode(gateway_factory: GatewayFactory, cluster: KafkaCluster, workdir: Path) -> Stack:
    """The gateway decides (its policy file), one shared upstream identity."""
    victim, attacker = _tenants(workdir)
    policy_dir = workdir / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    policy_file = policy_dir / "policy.csv"
    policy_file.write_text("\n".join(_policy(victim, attacker)) + "\n")
    quota_file = workdir / "quotas.json"
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        sasl={"mechanisms": ["PLAIN"],
              "credential_store": {"file": str(workdir / "credentials.json")},
              "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1}},
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={"store_file": str(quota_file), "settings_refresh_s": 0.5,
                "default_plan": "hostile", "plans": {"hostile": PLAN}},
    )  # fmt: skip
    return Stack(
        mode="gateway", gateway=gateway, cluster=cluster, victim=victim, attacker=attacker,
        policy_file=policy_file, quota_file=quota_file,
    )  # fmt: skip


def _brokers_mode(gateway_factory: GatewayFactory, cluster: KafkaCluster, workdir: Path) -> Stack:
    """Only the brokers decide: their own SASL cluster with ACLs, the gateway's checks off,
    per-tenant upstream principals."""
    enforced_cluster, password = make_cluster(workdir / "kafka", nodes=3)
    enforced_cluster.start()
    enforced = EnforcedStack(enforced_cluster, workdir, password)
    try:
        victim, attacker = _tenants(workdir)
        enforced.policy_dir.joinpath("policy.csv").write_text(
            "\n".join(_policy(victim, attacker)) + "\n"
        )
        config = enforced.config(gateway_checks=False)
        config["quotas"]["plans"] = {"hostile": PLAN}
        config["quotas"]["default_plan"] = "hostile"
        gateway = GatewayProcess(workdir / "gateway", config)
        enforced.gateways.append(gateway)
        gateway.start(expected_brokers=len(enforced_cluster.brokers))
    except BaseException:
        enforced.stop()
        enforced_cluster.stop()
        raise

    async def super_login(conn: RawConnection) -> None:
        await conn.authenticate_plain(GATEWAY_USER, password)

    def close() -> None:
        enforced.stop()
        enforced_cluster.stop()

    return Stack(
        mode="brokers", gateway=gateway, cluster=enforced_cluster, victim=victim,
        attacker=attacker, policy_file=enforced.policy_dir / "policy.csv",
        quota_file=workdir / "quotas.json", super_login=super_login, acls_on_brokers=True,
        close=close,
    )  # fmt: skip


Builder = Callable[[GatewayFactory, KafkaCluster, Path], Stack]
BUILDERS: dict[str, Builder] = {"gateway": _gateway_mode, "brokers": _brokers_mode}
MODES = list(BUILDERS)


# --- the victim's and the attacker's state ----------------------------------------------


def _create_topics(stack: Stack, tenant: Tenant, topics: list[NewTopic]) -> None:
    admin = AdminClient(tenant.conf(stack.bootstrap))
    for name, future in admin.create_topics(topics, operation_timeout=30).items():
        future.result(60)
        asyncio.run(_known_everywhere(stack, name))


async def _known_everywhere(stack: Stack, topic: str) -> None:
    """Until every broker's metadata has ``topic`` with a leader for each partition."""
    deadline = time.monotonic() + 30
    for node in stack.nodes():
        conn = await stack.super_connection(node)
        try:
            while True:
                answer, _raw = await conn.call(
                    request(
                        3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
                    )
                )
                (found,) = answer.topics
                if found.error_code == 0 and all(p.leader_id >= 0 for p in found.partitions):
                    break
                assert time.monotonic() < deadline, f"broker {node} never learnt {topic}"
                await asyncio.sleep(0.2)
        finally:
            conn.close()


def _produce(stack: Stack, tenant: Tenant, topic: str, values: list[bytes], **extra: Any) -> None:
    producer = Producer({**tenant.conf(stack.bootstrap), "acks": "all", **extra})
    errors: list[Any] = []
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % 3 if "orders" in topic else 0,
                         on_delivery=lambda e, _m: errors.append(e) if e else None)  # fmt: skip
    assert producer.flush(60) == 0 and not errors, errors


def _transaction(stack: Stack, tenant: Tenant, txn_id: str, topic: str, value: bytes) -> None:
    producer = Producer({**tenant.conf(stack.bootstrap), "transactional.id": txn_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic, value=value, partition=0)
    producer.commit_transaction(60)
    producer.flush(10)


async def _coordinator(stack: Stack, key: str, key_type: int) -> int:
    conn = await stack.super_connection(stack.nodes()[0])
    try:
        for _ in range(60):
            answer, _raw = await conn.call(request(10, 3, {"key": key, "key_type": key_type}))
            if answer.error_code == 0:
                return int(answer.node_id)
            await asyncio.sleep(0.5)
    finally:
        conn.close()
    raise AssertionError(f"no coordinator for {key}")


async def _leaders(stack: Stack, topics: list[str]) -> dict[str, tuple[uuid.UUID, dict[int, int]]]:
    conn = await stack.super_connection(stack.nodes()[0])
    try:
        answer, _raw = await conn.call(request(3, 12, {
            "topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False,
        }))  # fmt: skip
    finally:
        conn.close()
    found = {}
    for t in answer.topics:
        assert t.error_code == 0, t
        found[t.name] = (
            t.topic_id,
            {int(p.partition_index): int(p.leader_id) for p in t.partitions},
        )
    return found


async def _classic_member(
    stack: Stack, tenant: Tenant, group: str, node: int, topic: str
) -> tuple[str, int]:
    """Join ``group`` as its only member (long session timeout) and commit offsets."""
    conn = await stack.connect(tenant, node)
    try:
        join = {
            "group_id": group, "session_timeout": 1_800_000, "rebalance_timeout": 60_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None,
        }  # fmt: skip
        answer = await _retrying(conn, request(11, 9, join))
        if answer.error_code == 79:  # MEMBER_ID_REQUIRED
            answer, _raw = await conn.call(request(11, 9, {**join, "member_id": answer.member_id}),
                                           timeout_s=60)  # fmt: skip
        assert answer.error_code == 0, answer
        member, generation = str(answer.member_id), int(answer.generation_id)
        sync, _raw = await conn.call(request(14, 5, {
            "group_id": group, "generation_id": generation, "member_id": member,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"victim-assignment"}],
        }))  # fmt: skip
        assert sync.error_code == 0, sync
        await _commit(conn, group, topic, generation, member, [7, 5, 3])
        return member, generation
    finally:
        conn.close()


async def _commit(
    conn: RawConnection, group: str, topic: str, generation: int, member: str, offsets: list[int]
) -> None:
    answer, _raw = await conn.call(request(8, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": i, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": "m"} for i, o in enumerate(offsets)]}],
    }))  # fmt: skip
    codes = {p.error_code for t in answer.topics for p in t.partitions}
    assert codes == {0}, answer


async def _consumer_group(stack: Stack, tenant: Tenant, group: str, node: int, topic: str) -> None:
    """A KIP-848 group that had a member and now holds only committed offsets."""
    conn = await stack.connect(tenant, node)
    try:
        member = str(uuid.uuid4())
        beat = await _retrying(conn, request(68, 0, {
            "group_id": group, "member_id": member, "member_epoch": 0,
            "rebalance_timeout": 30_000, "subscribed_topic_names": [topic],
            "server_assignor": None, "topic_partitions": [],
        }))  # fmt: skip
        assert beat.error_code == 0, beat
        left, _raw = await conn.call(request(68, 0, {
            "group_id": group, "member_id": member, "member_epoch": -1,
            "subscribed_topic_names": None, "topic_partitions": None,
        }))  # fmt: skip
        assert left.error_code == 0, left
        await _commit(conn, group, topic, -1, "", [2, 2, 2])
    finally:
        conn.close()


async def _init_producer(stack: Stack, tenant: Tenant, txn_id: str, node: int) -> tuple[int, int]:
    conn = await stack.connect(tenant, node)
    try:
        answer = await _retrying(conn, request(22, 4, {
            "transactional_id": txn_id, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1,
        }))  # fmt: skip
        assert answer.error_code == 0, answer
        return int(answer.producer_id), int(answer.producer_epoch)
    finally:
        conn.close()


RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


async def _retrying(conn: RawConnection, body: Any) -> Any:
    for _ in range(60):
        answer, _raw = await conn.call(body, timeout_s=60)
        if int(answer.error_code) not in RETRIABLE:
            return answer
        await asyncio.sleep(0.5)
    return answer


def record_batch(value: bytes) -> bytes:
    """One uncompressed v2 record batch holding one record (for raw Produce)."""
    now = int(time.time() * 1000)
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=value)
    return encode(
        Batch(
            base_offset=0, partition_leader_epoch=0, attributes=0, last_offset_delta=0,
            base_timestamp=now, max_timestamp=now, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, records=[record],
        )
    )  # fmt: skip


def populate(stack: Stack) -> Ctx:
    """The victim's topics, records, groups and transaction; the attacker's own."""
    v, a = stack.victim, stack.attacker
    marker = f"SECRET-{uuid.uuid4().hex}"
    vt, vt2, at = f"{v.prefix}orders", f"{v.prefix}ledger", f"{a.prefix}own"
    _create_topics(stack, v, [
        NewTopic(vt, 3, 3), NewTopic(vt2, 1, 3, config={"retention.ms": "3600000"}),
    ])  # fmt: skip
    _create_topics(stack, a, [NewTopic(at, 1, 3), NewTopic(f"{a.prefix}retention", 1, 3)])
    _produce(stack, v, vt, [f"{marker}-{i}".encode() for i in range(30)])
    _produce(stack, a, at, [f"attacker-{i}".encode() for i in range(5)])
    vtx, atx = f"{v.prefix}tx", f"{a.prefix}tx"
    _transaction(stack, v, vtx, vt2, marker.encode())
    vg, vcg, ag, acg = f"{v.prefix}readers", f"{v.prefix}cg", f"{a.prefix}readers", f"{a.prefix}cg"

    async def groups() -> Ctx:
        topics = await _leaders(stack, [vt, vt2, at])
        nodes = {g: await _coordinator(stack, g, 0) for g in (vg, vcg, ag, acg)}
        txn_nodes = {t: await _coordinator(stack, t, 1) for t in (vtx, atx)}
        member, generation = await _classic_member(stack, v, vg, nodes[vg], vt)
        await _consumer_group(stack, v, vcg, nodes[vcg], vt)
        conn = await stack.connect(a, nodes[ag])
        try:
            await _commit(conn, ag, at, -1, "", [1])
        finally:
            conn.close()
        atx_pid, atx_epoch = await _init_producer(stack, a, atx, txn_nodes[atx])
        pid, epoch = await _victim_txn(stack, vtx, txn_nodes[vtx])
        return Ctx(
            vt=vt, vt_id=topics[vt][0], vt2=vt2, vt2_id=topics[vt2][0], vg=vg,
            vg_member=member, vg_generation=generation, vcg=vcg, vtx=vtx, vtx_pid=pid,
            vtx_epoch=epoch, victim_principal=v.principal, victim_key=v.key_id, marker=marker,
            at=at, at_id=topics[at][0], ag=ag, acg=acg, atx=atx, atx_pid=atx_pid,
            atx_epoch=atx_epoch, attacker_principal=a.principal,
            records=record_batch(b"attacker-write"),
            leaders={t: parts for t, (_id, parts) in topics.items()},
            group_node=nodes, txn_node=txn_nodes,
        )  # fmt: skip

    return asyncio.run(groups())


async def _victim_txn(stack: Stack, txn_id: str, node: int) -> tuple[int, int]:
    conn = await stack.super_connection(node)
    try:
        answer, _raw = await conn.call(request(65, 0, {"transactional_ids": [txn_id]}))
    finally:
        conn.close()
    (state,) = answer.transaction_states
    assert state.error_code == 0 and state.transaction_state == "CompleteCommit", state
    return int(state.producer_id), int(state.producer_epoch)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]
