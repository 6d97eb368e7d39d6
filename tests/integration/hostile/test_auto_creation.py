"""A tenant under a plan creating topics past ``max_topics`` with Metadata's
``allow_auto_topic_creation`` instead of CreateTopics.

Kafka's brokers auto-create topics named in a Metadata request by default
(``auto.create.topics.enable=true``, v4+ when the client asks). The plan's licence
counts CreateTopics and CreatePartitions; an auto-created topic was never counted, so
a tenant at its limit could add any number of topics (of ``num.partitions`` each).
Here a one-node cluster of its own with auto-creation on, a gateway with SASL PLAIN
and a plan of two topics: the tenant's Metadata naming new topics with auto-creation
must create none once the plan is in force (the tenant is answered as if the topic
did not exist, and creates topics with CreateTopics, where they are counted).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..rawkafka import RawConnection
from .kafkamsg import request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def auto_creating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka-autocreate"),
        nodes=1,
        extra_broker_props={"auto.create.topics.enable": "true", "num.partitions": "4"},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_metadata_auto_creation_does_not_pass_the_plan(
    auto_creating: KafkaCluster, tmp_path: Path
) -> None:
    store_file = tmp_path / "credentials.json"
    tenant = f"ac{uuid.uuid4().hex[:6]}"
    store = open_store(CredentialStoreConfig(file=store_file))
    key, secret = asyncio.run(
        store.create_api_key(principal=f"User:{tenant}.app", tenant=tenant, actor="test")
    )
    bootstrap, base = pick_ports()
    listener = {"name": "tenants", "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
                "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
                "authentication": "sasl"}  # fmt: skip
    config = dev_config(
        auto_creating.bootstrap_servers, bootstrap, base, listeners=[listener],
        sasl={"mechanisms": ["PLAIN"], "credential_store": {"file": str(store_file)}},
        quotas={"store_file": str(tmp_path / "quotas.json"), "settings_refresh_s": 0.5,
                "default_plan": "small", "plans": {"small": {"max_topics": 2}}},
    )  # fmt: skip
    gateway = GatewayProcess(tmp_path / "gw", config)
    try:
        gateway.start(None, timeout=120)
        conf: dict[str, Any] = {
            "bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": key.key_id, "sasl.password": secret,
        }  # fmt: skip
        admin = AdminClient(conf)  # alive until the answers
        for name in (f"{tenant}.a", f"{tenant}.b"):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
        third = f"{tenant}.c"
        with pytest.raises(Exception, match=r"(?i)polic|quota|limit|plan"):
            admin.create_topics([NewTopic(third, 1, 1)])[third].result(60)
        wanted = [f"{tenant}.auto-{i}" for i in range(3)]

        async def ask() -> list[int]:
            conn = await RawConnection.open_plain(gateway.bootstrap, key.key_id, secret)
            try:
                codes = []
                for version in (4, 12):
                    answer, _raw = await conn.call(request(3, version, {
                        "topics": [{"name": n} for n in wanted],
                        "allow_auto_topic_creation": True,
                    }))  # fmt: skip
                    codes += [int(t.error_code) for t in answer.topics]
                await asyncio.sleep(3.0)  # an auto-creation would be done by now
                return codes
            finally:
                conn.close()

        codes = asyncio.run(ask())
        on_cluster = set(
            AdminClient({"bootstrap.servers": auto_creating.bootstrap_servers})
            .list_topics(timeout=30)
            .topics
        )
        mine = sorted(t for t in on_cluster if t.startswith(f"{tenant}."))
        assert mine == [f"{tenant}.a", f"{tenant}.b"], (mine, codes)
    finally:
        gateway.stop()
