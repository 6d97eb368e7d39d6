"""Quota administration and licence limits through a real gateway, with real clients.

Kafka's own ``kafka-configs`` (``kafka.admin.ConfigCommand``) changes and reads the
gateway's quota store through DescribeClientQuotas / AlterClientQuotas; a tenant's
confluent-kafka AdminClient meets its plan's licence limits. SASL (SCRAM for the
operator, API keys for the tenants) names the principals and tenants; casbin
policies authorize. Credentials are made here, at test time.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.quotas.store import FileQuotaStore

from ..conftest import GatewayFactory, gateway_log_events, sasl_listener

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).parents[2] / "policies"
DAY_MS = 86_400_000
PLAN = {"max_topics": 3, "max_partitions_per_topic": 4, "max_total_partitions": 8,
        "max_retention_ms": DAY_MS}  # fmt: skip
OPERATOR = "quota-ops"
POLICY_VIOLATION = 44


@dataclass
class Stack:
    gateway: GatewayProcess
    quota_file: Path
    tenant: str  # tenants are unique per run, so their namespaces start empty
    operator: dict[str, Any]  # SCRAM operator, no tenant: a cluster admin
    acme: dict[str, Any]  # the tenant's API key
    acme_principal: str
    licensed_tenant: str  # a second tenant on the small plan, for the licence test alone
    licensed: dict[str, Any]
    other_key: str  # another tenant's API key id (a client-id entity)
    workdir: Path


def _policy(*tenants: str) -> list[str]:
    lines = [
        f"p, User:{OPERATOR}, CLUSTER, LITERAL, kafka-cluster, ALTER_CONFIGS, *, allow",
        f"p, User:{OPERATOR}, CLUSTER, LITERAL, kafka-cluster, DESCRIBE_CONFIGS, *, allow",
        f"p, User:{OPERATOR}, CLUSTER, LITERAL, kafka-cluster, DESCRIBE, *, allow",
    ]
    for tenant in tenants:
        lines.append(f"p, User:{tenant}.app, TOPIC, PREFIXED, {tenant}., ALL, *, allow")
        lines.append(f"p, User:{tenant}.app, GROUP, PREFIXED, {tenant}., ALL, *, allow")
    return lines


@pytest.fixture(scope="module")
def stack(gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    workdir = tmp_path_factory.mktemp("quota-admin")
    tenant = f"acme{uuid.uuid4().hex[:6]}"
    licensed = f"small{uuid.uuid4().hex[:6]}"
    store = open_store(CredentialStoreConfig(file=workdir / "credentials.json"))
    password = f"pw-{uuid.uuid4().hex}"

    async def make() -> tuple[str, str, str, str, str]:
        await store.put_scram(OPERATOR, "SCRAM-SHA-256", password, iterations=4096, actor="test")
        key, secret = await store.create_api_key(
            principal=f"User:{tenant}.app", tenant=tenant, actor="test"
        )
        other, _ = await store.create_api_key(
            principal="User:globex.app", tenant="globex", actor="test"
        )
        small, small_secret = await store.create_api_key(
            principal=f"User:{licensed}.app", tenant=licensed, actor="test"
        )
        return key.key_id, secret, other.key_id, small.key_id, small_secret

    key_id, secret, other_key, small_id, small_secret = asyncio.run(make())
    policy_dir = workdir / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("\n".join(_policy(tenant, licensed)) + "\n")
    listener = sasl_listener()
    quota_file = workdir / "quotas.json"
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[listener],
        sasl={
            "mechanisms": ["PLAIN", "SCRAM-SHA-256"],
            "credential_store": {"file": str(workdir / "credentials.json")},
        },
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        quotas={
            "store_file": str(quota_file),
            "settings_refresh_s": 0.2,
            "max_throttle_ms": 2000,
            "default_plan": "small",
            "plans": {"small": PLAN},
        },
    )

    def conf(mechanism: str, user: str, secret: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": secret,
        }  # fmt: skip

    return Stack(
        gateway=gateway,
        quota_file=quota_file,
        tenant=tenant,
        operator=conf("SCRAM-SHA-256", OPERATOR, password),
        acme=conf("PLAIN", key_id, secret),
        acme_principal=f"User:{tenant}.app",
        other_key=other_key,
        licensed_tenant=licensed,
        licensed=conf("PLAIN", small_id, small_secret),
        workdir=workdir,
    )


def _properties(path: Path, conf: dict[str, Any]) -> Path:
    module = (
        "org.apache.kafka.common.security.scram.ScramLoginModule"
        if conf["sasl.mechanism"].startswith("SCRAM")
        else "org.apache.kafka.common.security.plain.PlainLoginModule"
    )
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={conf['sasl.mechanism']}\n"
        f'sasl.jaas.config={module} required username="{conf["sasl.username"]}" '
        f'password="{conf["sasl.password"]}";\n'
    )
    path.chmod(0o600)
    return path


def _configs(
    cluster: KafkaCluster, stack: Stack, props: Path, args: list[str]
) -> tuple[int, str, str]:
    done = cluster.run_tool(
        "configs",
        ["--bootstrap-server", stack.gateway.bootstrap, "--command-config", str(props), *args],
        timeout=180,
    )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    return done.returncode, out, err


def _stored(stack: Stack) -> dict[str, dict[str, float]]:
    settings = FileQuotaStore(stack.quota_file).load()
    return {str(t): dict(v) for t, v in settings.quotas.items()}


def test_kafka_configs_sets_quotas_that_then_take_effect(
    stack: Stack, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    props = _properties(tmp_path / "operator.properties", stack.operator)
    user = stack.acme_principal.removeprefix("User:")
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--alter", "--add-config", "producer_byte_rate=200000,consumer_byte_rate=400000",
        "--entity-type", "users", "--entity-name", user,
    ])  # fmt: skip
    assert code == 0, err[-2000:]
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--alter", "--add-config", "request_percentage=50",
        "--entity-type", "clients", "--entity-name", stack.other_key,
    ])  # fmt: skip
    assert code == 0, err[-2000:]
    # The gateway's store changed (not the brokers'), attributed to the operator.
    stored = _stored(stack)
    assert stored[f"principal:{stack.acme_principal}"] == {
        "produce_bytes": 200_000, "fetch_bytes": 400_000,
    }  # fmt: skip
    assert stored[f"api-key:{stack.other_key}"] == {"requests": 50}
    changes = [
        e for e in gateway_log_events(stack.gateway, "quota_changed")
        if e.get("subject") == f"principal:{stack.acme_principal}"
    ]  # fmt: skip
    assert changes and f"User:{OPERATOR}" in changes[-1]["msg"], changes
    # Kafka's tool reads them back through the gateway.
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--describe", "--entity-type", "clients", "--entity-name", stack.other_key,
    ])  # fmt: skip
    assert code == 0, err[-2000:]
    assert "request_percentage=50" in out, out
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--describe", "--entity-type", "users", "--entity-name", user,
    ])  # fmt: skip
    assert "producer_byte_rate=200000" in out and "consumer_byte_rate=400000" in out, (out, err)
    # And the produce quota applies to the tenant's principal. KIP-219 answers first and
    # throttles after, with the debt capped at rate * max_throttle_ms, so sending A bytes
    # takes at least (A - burst - rate * cap) / rate: (1.6 MB - 200 kB - 400 kB) / 200 kB/s.
    topic = f"{stack.tenant}.throttled"
    admin = AdminClient(stack.acme)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    stats: list[dict[str, Any]] = []
    producer = Producer({
        **stack.acme, "acks": "all", "linger.ms": 5, "batch.size": 16384,
        "statistics.interval.ms": 500, "stats_cb": lambda s: stats.append(json.loads(s)),
    })  # fmt: skip
    value = b"q" * 10_000
    started = time.monotonic()
    for _ in range(160):
        producer.produce(topic, value=value)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    producer.poll(1)
    least = (1_600_000 - 200_000 - 200_000 * 2.0) / 200_000
    print(f"1.6 MB under a 200 kB/s produce quota took {elapsed:.1f}s (at least {least:.1f}s)")
    assert elapsed >= 0.9 * least, elapsed
    assert any(
        b.get("throttle", {}).get("max", 0) > 0
        for s in stats for b in s.get("brokers", {}).values()
    ), "throttle_time_ms never reached the producer's statistics"  # fmt: skip


def test_a_tenant_cannot_change_quotas(
    stack: Stack, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    props = _properties(tmp_path / "tenant.properties", stack.acme)
    before = _stored(stack)
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--alter", "--add-config", "producer_byte_rate=999999999",
        "--entity-type", "users", "--entity-name", stack.acme_principal.removeprefix("User:"),
    ])  # fmt: skip
    assert code != 0
    assert re.search(r"ClusterAuthorization|Cluster authorization failed", out + err), err[-2000:]
    assert _stored(stack) == before
    code, out, err = _configs(kafka_cluster, stack, props, [
        "--describe", "--entity-type", "clients", "--entity-name", stack.other_key,
    ])  # fmt: skip
    assert code != 0 and "request_percentage" not in out, out  # not even readable


def _result(future: Any) -> KafkaError | None:
    try:
        future.result(60)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def test_licence_limits_refuse_beyond_the_plan_and_create_the_rest(stack: Stack) -> None:
    t = stack.licensed_tenant
    admin = AdminClient(stack.licensed)
    first = admin.create_topics([
        NewTopic(f"{t}.one", 2, 3),
        NewTopic(f"{t}.two", 2, 3),
        NewTopic(f"{t}.wide", 6, 3),  # more partitions per topic than the plan allows
        NewTopic(f"{t}.forever", 1, 3, config={"retention.ms": "-1"}),
    ], operation_timeout=30)  # fmt: skip
    errors = {name: _result(future) for name, future in first.items()}
    assert errors[f"{t}.one"] is None and errors[f"{t}.two"] is None, errors
    wide, forever = errors[f"{t}.wide"], errors[f"{t}.forever"]
    assert wide is not None and wide.code() == POLICY_VIOLATION, wide
    assert "at most 4 partitions per topic" in wide.str(), wide.str()
    assert forever is not None and forever.code() == POLICY_VIOLATION, forever
    assert "infinite retention" in forever.str(), forever.str()
    # 2 topics, 4 partitions: a third topic of 3 fits (7 of 8), a fourth topic does not.
    second = admin.create_topics(
        [NewTopic(f"{t}.three", 3, 3), NewTopic(f"{t}.four", 1, 3)], operation_timeout=30
    )
    errors = {name: _result(future) for name, future in second.items()}
    assert errors[f"{t}.three"] is None, errors
    four = errors[f"{t}.four"]
    assert four is not None and four.code() == POLICY_VIOLATION and "at most 3 topics" in four.str()
    # Partitions: one -> 3 brings the total to 8 (allowed); three -> 5 is beyond 4 per topic.
    grown = admin.create_partitions(
        [NewPartitions(f"{t}.one", 3), NewPartitions(f"{t}.three", 5)], operation_timeout=30
    )
    errors = {name: _result(future) for name, future in grown.items()}
    assert errors[f"{t}.one"] is None, errors
    three = errors[f"{t}.three"]
    assert three is not None and three.code() == POLICY_VIOLATION, three

    # Retention changes beyond the plan are refused; within it they pass.
    def retention(value: str) -> KafkaError | None:
        entry = ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC, f"{t}.two", incremental_configs=[entry]
        )
        (future,) = admin.incremental_alter_configs([resource]).values()
        return _result(future)

    assert retention(str(DAY_MS // 2)) is None
    too_long = retention(str(DAY_MS * 30))
    assert too_long is not None and too_long.code() == POLICY_VIOLATION, too_long
    assert f"retention.ms up to {DAY_MS}" in too_long.str()
    # What the cluster holds now: exactly what was allowed.
    listed = admin.list_topics(timeout=30).topics
    mine = {name: len(meta.partitions) for name, meta in listed.items() if name.startswith(f"{t}.")}
    assert mine == {f"{t}.one": 3, f"{t}.two": 2, f"{t}.three": 3}, mine
    refused = gateway_log_events(stack.gateway, "licence_refused")
    assert any(e.get("subject") == f"tenant:{t}" for e in refused), refused
