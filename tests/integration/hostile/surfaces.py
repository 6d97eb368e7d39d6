"""The stack of the hostile tenant's suite against the newer surfaces
(``test_new_surfaces``): a gateway with SASL, authorization, quotas, namespaces and the
record-encryption filter; a prefixed victim and attacker and a transparent attacker."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.kms.filekms import FileKms

from ...conftest import GatewayFactory, sasl_listener
from .kafkamsg import request
from .snapshot import Snapshot, differences, snapshot
from .stack import PLAN, POLICIES, Ctx, Stack, Tenant, _policy, _tenants, populate


@dataclasses.dataclass
class Surfaces:
    stack: Stack
    ctx: Ctx
    t: Tenant  # the transparent attacker
    baseline: Snapshot
    policy_lines: set[str]
    secret_topic: str  # the victim's encrypted topic (cluster-side)
    secret_id: uuid.UUID
    secret_marker: str
    advertised: dict[int, tuple[int, int]]
    typed: set[Any] = dataclasses.field(default_factory=set)  # what T named itself

    def secrets(self) -> dict[Any, str]:
        found = self.ctx.secrets()
        found.update({self.secret_topic: "victim encrypted topic",
                      self.secret_id: "victim encrypted topic id",
                      self.secret_marker: "victim encrypted record"})  # fmt: skip
        return found


def third_tenant(workdir: Path) -> Tenant:
    store = open_store(CredentialStoreConfig(file=workdir / "credentials.json"))
    name = f"tns{uuid.uuid4().hex[:6]}"

    async def make() -> Tenant:
        principal = f"User:{name}.app"
        key, secret = await store.create_api_key(principal=principal, tenant=name, actor="test")
        return Tenant(name, principal, key.key_id, secret)

    return asyncio.run(make())


def open_surfaces(
    gateway_factory: GatewayFactory, kafka_cluster: KafkaCluster, work: Path
) -> Iterator[Surfaces]:
    """The module's gateway and tenants (see ``test_new_surfaces``); after the tests,
    the victim's state must be what it was."""
    victim, attacker = _tenants(work)
    t = third_tenant(work)
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    policy_file = policy_dir / "policy.csv"
    policy_file.write_text("\n".join(_policy(victim, attacker, t)) + "\n")
    kms_path = work / "keks.json"
    kms = FileKms(kms_path)
    for tenant in (victim, attacker, t):
        kms.create(tenant.name)
    encryption = {
        "kms": {"backend": "file", "file": {"path": str(kms_path)},
                "allow_development_backend": True},
        "policies": [{"tenant": "*",
                      "prefixes": [f"{x.name}.secret" for x in (victim, attacker, t)]}],
    }  # fmt: skip
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        sasl={"mechanisms": ["PLAIN"],
              "credential_store": {"file": str(work / "credentials.json")},
              "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1}},
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={"store_file": str(work / "quotas.json"), "settings_refresh_s": 0.5,
                "default_plan": "hostile", "plans": {"hostile": PLAN}},
        namespaces={"listeners": ["tenants"], "transparent_tenants": [t.name]},
        filters=[{"module": "gateway.encryption:EncryptionFilter", "config": encryption}],
    )  # fmt: skip
    stack = Stack(
        mode="namespaces", gateway=gateway, cluster=kafka_cluster, victim=victim,
        attacker=attacker, policy_file=policy_file, quota_file=work / "quotas.json",
    )  # fmt: skip
    ctx = stack.ctx = populate(stack)
    secret_topic = f"{victim.prefix}secret-ledger"
    admin = AdminClient(victim.conf(stack.bootstrap))  # alive until the answer
    admin.create_topics([NewTopic(secret_topic, 1, 3)])[secret_topic].result(60)
    marker = f"PLAINTEXT-{uuid.uuid4().hex}"
    producer = Producer({**victim.conf(stack.bootstrap), "acks": "all", "linger.ms": 5})
    for i in range(5):
        producer.produce(secret_topic, value=f"{marker}-{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    secret_id = asyncio.run(topic_id(stack, secret_topic))
    baseline = asyncio.run(snapshot(stack, ctx))

    async def offered() -> dict[int, tuple[int, int]]:
        conn = await stack.connect(t)
        try:
            return await conn.api_versions()
        finally:
            conn.close()

    found = Surfaces(stack, ctx, t, baseline, set(policy_file.read_text().splitlines()),
                     secret_topic, secret_id, marker, asyncio.run(offered()))  # fmt: skip
    yield found
    after = asyncio.run(snapshot(stack, ctx))
    changed = [d for d in differences(baseline, after) if not d.startswith("/policy")]
    assert not changed, "the victim's state changed:\n" + "\n".join(changed)


async def topic_id(stack: Stack, topic: str) -> uuid.UUID:
    conn = await stack.super_connection(stack.nodes()[0])
    try:
        answer, _raw = await conn.call(
            request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        )
    finally:
        conn.close()
    (entry,) = answer.topics
    assert entry.error_code == 0, entry
    return uuid.UUID(str(entry.topic_id))
