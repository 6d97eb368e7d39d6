"""The hostile tenant against ``kgw serve --workers 2`` (decision 0030): state that must
hold for the whole host, not per worker process.

A revoked API key must end the tenant's live connections on *every* worker and be
refused by every worker at login, wherever the kernel lands the tenant's connections;
a worker's private metrics endpoint listens on loopback only and the tenant listener
does not answer HTTP. (Per-worker by design and documented in decision 0030: connection
limits and the login failure limiter, N x the configured figure on a host.)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ...redis_server import free_port
from .. import workerprocs as wp
from ..rawkafka import RawConnection

pytestmark = pytest.mark.integration
REVALIDATE_S = 0.5


@pytest.fixture
def sasl_workers(kafka_cluster: KafkaCluster, tmp_path: Path) -> Iterator[GatewayProcess]:
    store_file = tmp_path / "credentials.json"
    open_store(CredentialStoreConfig(file=store_file))
    bootstrap, base = pick_ports()
    listener = {"name": "tenants", "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
                "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
                "authentication": "sasl"}  # fmt: skip
    config = dev_config(
        kafka_cluster.bootstrap_servers, bootstrap, base,
        listeners=[listener], server={"workers": 2}, metrics={"port": free_port()},
        sasl={"mechanisms": ["PLAIN"], "credential_store": {"file": str(store_file)},
              "revalidate_interval_s": REVALIDATE_S,
              "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1}},
    )  # fmt: skip
    gateway = GatewayProcess(tmp_path / "gw", config)
    try:
        gateway.start(None, timeout=wp.START_TIMEOUT_S)
        assert gateway.pid is not None
        wp.wait_workers(gateway.pid, 2, timeout=wp.START_TIMEOUT_S)
        yield gateway
    finally:
        gateway.stop()


def _key(gateway: GatewayProcess) -> tuple[str, str]:
    store = open_store(
        CredentialStoreConfig(file=gateway.config["sasl"]["credential_store"]["file"])
    )
    tenant = f"wk{uuid.uuid4().hex[:6]}"

    async def make() -> tuple[str, str]:
        key, secret = await store.create_api_key(
            principal=f"User:{tenant}.app", tenant=tenant, actor="test"
        )
        return key.key_id, secret

    return asyncio.run(make())


async def _revoke(gateway: GatewayProcess, key_id: str) -> None:
    store = open_store(
        CredentialStoreConfig(file=gateway.config["sasl"]["credential_store"]["file"])
    )
    await store.revoke_api_key(key_id, actor="test")


def test_a_revoked_key_is_ended_and_refused_on_every_worker(
    sasl_workers: GatewayProcess,
) -> None:
    gateway = sasl_workers
    assert gateway.pid is not None
    pids = list(wp.workers(gateway.pid).values())
    assert len(pids) == 2
    key_id, secret = _key(gateway)
    time.sleep(1.0)  # the store file is read by each worker

    async def go() -> None:
        live: list[tuple[RawConnection, int]] = []
        held: set[int] = set()
        for _ in range(40):  # until both workers hold some of the tenant's connections
            conn = await RawConnection.open_plain(gateway.bootstrap, key_id, secret)
            port = conn.writer.get_extra_info("sockname")[1]
            pid = wp.owner(port, pids)
            assert pid is not None
            live.append((conn, pid))
            held.add(pid)
            if held == set(pids) and len(live) >= 6:
                break
        assert held == set(pids), "the kernel never gave the second worker a connection"
        await _revoke(gateway, key_id)
        deadline = time.monotonic() + 30
        for conn, pid in live:
            assert await conn.closed_by_peer(max(0.1, deadline - time.monotonic())), (
                f"worker {pid} kept a revoked key's connection open"
            )
            conn.close()
        refused_by: set[int] = set()
        for _ in range(40):
            conn = await RawConnection.open(gateway.bootstrap)
            pid = wp.owner(conn.writer.get_extra_info("sockname")[1], pids)
            try:
                with pytest.raises((AssertionError, asyncio.IncompleteReadError, ConnectionError)):
                    await conn.authenticate_plain(key_id, secret)
            finally:
                conn.close()
            if pid is not None:
                refused_by.add(pid)
            if refused_by == set(pids):
                break
        assert refused_by == set(pids), "logins were not tried on both workers"

    asyncio.run(go())


def test_worker_metrics_are_loopback_and_the_tenant_listener_is_not_http(
    sasl_workers: GatewayProcess,
) -> None:
    gateway = sasl_workers
    assert gateway.pid is not None
    for pid in wp.workers(gateway.pid).values():
        port = wp.metrics_port(pid)
        assert port is not None
        listening = [
            line.split()[1]
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
            if line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) == port
        ]
        assert listening and all(a.startswith("0100007F") for a in listening), listening

    async def http_on_kafka() -> bytes:
        host, port = gateway.bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 15)
        writer.close()
        return data

    for _ in range(4):  # whichever worker gets it
        data = asyncio.run(http_on_kafka())
        assert b"HTTP/" not in data and b"kgw_" not in data, data[:200]
