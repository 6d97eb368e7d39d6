"""Plan limits on config values as the broker reads them, through a real gateway.

The hostile value of issue 14 (``retention.ms = "\\x01-1"``) is first shown to be
infinite retention to a real Kafka 4.1 broker (CreateTopics straight to it, with
``validate_only``), then refused by the gateway with POLICY_VIOLATION; values the
broker would refuse, and unknown keys, are INVALID_CONFIG at the gateway.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, sasl_listener

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).parents[2] / "policies"
DAY_MS = 86_400_000
INVALID_CONFIG, POLICY_VIOLATION = 40, 44


def _result(future: Any) -> KafkaError | None:
    try:
        future.result(60)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def _codes(futures: Mapping[Any, Any]) -> dict[Any, int]:
    return {key: (0 if (e := _result(f)) is None else e.code()) for key, f in futures.items()}


def _tenant_topics(admin: AdminClient, tenant: str, created: str) -> list[str]:
    """The tenant's topics once ``created`` shows in the metadata (it trails the controller)."""
    deadline = time.monotonic() + 30
    while True:
        topics = admin.list_topics(timeout=30).topics
        listed = sorted(t for t in topics if t.startswith(f"{tenant}."))
        if created in listed or time.monotonic() > deadline:
            return listed
        time.sleep(0.2)


@pytest.fixture(scope="module")
def tenant_admin(
    gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, AdminClient]:
    """A tenant on a plan limiting retention to a day, and its AdminClient."""
    workdir = tmp_path_factory.mktemp("licence-configs")
    tenant = f"cfg{uuid.uuid4().hex[:6]}"
    store = open_store(CredentialStoreConfig(file=workdir / "credentials.json"))
    key, secret = asyncio.run(
        store.create_api_key(principal=f"User:{tenant}.app", tenant=tenant, actor="test")
    )
    policies = workdir / "policies"
    policies.mkdir()
    shutil.copy(POLICIES / "model.conf", policies / "model.conf")
    (policies / "policy.csv").write_text(
        f"p, User:{tenant}.app, TOPIC, PREFIXED, {tenant}., ALL, *, allow\n"
    )
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        sasl={"mechanisms": ["PLAIN"],
              "credential_store": {"file": str(workdir / "credentials.json")}},
        authorization={"policy_dir": str(policies)},
        quotas={"store_file": str(workdir / "quotas.json"), "default_plan": "small",
                "plans": {"small": {"max_retention_ms": DAY_MS}}},
    )  # fmt: skip
    admin = AdminClient({
        "bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": key.key_id, "sasl.password": secret,
    })  # fmt: skip
    return tenant, admin


def test_the_broker_reads_a_control_character_away(kafka_cluster: KafkaCluster) -> None:
    """The attack is real: Kafka trims "\\x01-1" to -1 and takes it; "1_000" it refuses."""
    direct = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    name = f"direct{uuid.uuid4().hex[:6]}"
    for value, code in (("\x01-1", 0), ("\t-1 ", 0), ("1_000", INVALID_CONFIG)):
        topic = NewTopic(name, 1, 3, config={"retention.ms": value})
        (future,) = direct.create_topics([topic], validate_only=True).values()
        assert _codes({value: future}) == {value: code}


def test_create_topics_is_decided_on_the_brokers_reading(
    tenant_admin: tuple[str, AdminClient],
) -> None:
    tenant, admin = tenant_admin
    asked = {
        "ctrl": {"retention.ms": "\x01-1"},
        "tab": {"retention.ms": "\t-1 "},
        "under": {"retention.ms": "1_000"},
        "typo": {"retention.mss": "1000"},
        "ok": {"retention.ms": "+3600000"},
    }
    topics = [NewTopic(f"{tenant}.{n}", 1, 3, config=c) for n, c in asked.items()]
    codes = _codes(admin.create_topics(topics, operation_timeout=30))
    assert codes == {f"{tenant}.ctrl": POLICY_VIOLATION, f"{tenant}.tab": POLICY_VIOLATION,
                     f"{tenant}.under": INVALID_CONFIG, f"{tenant}.typo": INVALID_CONFIG,
                     f"{tenant}.ok": 0}  # fmt: skip
    assert _tenant_topics(admin, tenant, f"{tenant}.ok") == [f"{tenant}.ok"]


def test_incremental_alter_configs_is_decided_on_the_brokers_reading(
    tenant_admin: tuple[str, AdminClient],
) -> None:
    tenant, admin = tenant_admin
    name = f"{tenant}.alter"
    assert _codes(admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=30)) == {name: 0}

    def alter(key: str, value: str | None, op: AlterConfigOpType) -> int:
        entry = ConfigEntry(key, value, incremental_operation=op)
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        (code,) = _codes(admin.incremental_alter_configs([resource])).values()
        return code

    assert alter("retention.ms", "\x1f-1", AlterConfigOpType.SET) == POLICY_VIOLATION
    assert alter("retention.ms", "\x1f86400001", AlterConfigOpType.SET) == POLICY_VIOLATION
    assert alter("retention.ms", "1e3", AlterConfigOpType.SET) == INVALID_CONFIG
    assert alter("retention.ms", "1", AlterConfigOpType.APPEND) == INVALID_CONFIG
    assert alter("no.such.config", None, AlterConfigOpType.DELETE) == INVALID_CONFIG
    assert alter("retention.ms", " 3600000", AlterConfigOpType.SET) == 0
    assert alter("retention.ms", None, AlterConfigOpType.DELETE) == 0  # the broker's default
