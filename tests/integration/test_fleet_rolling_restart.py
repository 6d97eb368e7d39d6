"""Three ``kgw serve`` instances behind a real HAProxy (Debian's binary) on loopback
serve one producer (acks=all) and one consumer through a rolling restart: each
instance in turn gets SIGTERM, drains, exits 0 and comes back; every acknowledged
record is consumed afterwards.

Port-per-broker through a load balancer: HAProxy has one frontend per public port
(bootstrap, and broker N on base + N), each balancing over the three instances'
ports for that broker; the instances advertise HAProxy's ports
(``advertised_bootstrap_port`` / ``advertised_port_base``), so clients always come
back through HAProxy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.config import load_config
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.tenants import onboard

from ..redis_server import RedisServer, free_port
from ..unit.tenants.conftest import stores_for
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
INSTANCES = 3
POLICIES = Path(__file__).resolve().parents[2] / "policies"


def haproxy_config(public: tuple[int, int], nodes: list[int], gateways: list[GatewayProcess],
                   metrics_ports: list[int]) -> str:  # fmt: skip
    """One frontend per public port, each over every instance's port for it (/readyz checks)."""
    bootstrap, base = public
    lines = [
        "global", "    maxconn 4000",
        "defaults", "    mode tcp", "    timeout connect 3s", "    timeout client 15m",
        "    timeout server 15m", "    retries 3", "    option redispatch",
        "    default-server check inter 500ms fall 1 rise 2",
    ]  # fmt: skip
    ports: list[tuple[str, int, list[int]]] = [
        ("bootstrap", bootstrap, [int(g.listener["bootstrap_port"]) for g in gateways])
    ]
    for node in nodes:
        ports.append((f"broker-{node}", base + node, [g.public_port(node) for g in gateways]))
    for name, port, targets in ports:
        lines += [f"frontend {name}", f"    bind 127.0.0.1:{port}", f"    default_backend {name}"]
        lines += [f"backend {name}", "    balance leastconn", "    option httpchk GET /readyz"]
        for index, (target, check) in enumerate(zip(targets, metrics_ports, strict=True)):
            lines.append(f"    server kgw-{index} 127.0.0.1:{target} port {check}")
    return "\n".join(lines) + "\n"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status), answer.read().decode()
    except OSError:
        return 0, ""


def wait_ready(metrics_port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _get(f"http://127.0.0.1:{metrics_port}/readyz")[0] == 200:
            return
        time.sleep(0.2)
    raise AssertionError(f"gateway with metrics port {metrics_port} never became ready")


def connections_served(metrics_port: int) -> float:
    _, text = _get(f"http://127.0.0.1:{metrics_port}/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kgw_connections_total{")
    )


class Fleet:
    def __init__(
        self, cluster: KafkaCluster, work: Path, authenticated: bool = False, **overrides: Any
    ) -> None:
        self.public = pick_ports()
        self.metrics_ports = [free_port() for _ in range(INSTANCES)]
        self.authenticated = authenticated
        self.gateways: list[GatewayProcess] = []
        for index in range(INSTANCES):
            bootstrap, base = pick_ports()
            config = dev_config(
                cluster.bootstrap_servers, bootstrap, base,
                metrics={"port": self.metrics_ports[index]},
                shutdown={"drain_timeout_s": 10}, **overrides,
            )  # fmt: skip
            config["listeners"][0].update(
                advertised_bootstrap_port=self.public[0], advertised_port_base=self.public[1]
            )
            if authenticated:
                config["listeners"][0]["authentication"] = "sasl"
            self.gateways.append(GatewayProcess(work / f"kgw-{index}", config))
        self.cfg = work / "haproxy.cfg"
        nodes = sorted(cluster.brokers)
        self.cfg.write_text(haproxy_config(self.public, nodes, self.gateways, self.metrics_ports))
        self.haproxy: subprocess.Popen[bytes] | None = None
        self.bootstrap = f"127.0.0.1:{self.public[0]}"

    def start(self) -> None:
        for gateway in self.gateways:
            gateway.start(expected_brokers=None)
        for port in self.metrics_ports:
            wait_ready(port)
        binary = shutil.which("haproxy")
        assert binary, "haproxy is not installed (Debian package haproxy)"
        checked = subprocess.run([binary, "-c", "-f", str(self.cfg)], capture_output=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        log = (self.cfg.parent / "haproxy.log").open("wb")
        self.haproxy = subprocess.Popen([binary, "-db", "-f", str(self.cfg)], stdout=log,
                                        stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.authenticated:  # clients need credentials: the port is enough here
                    socket.create_connection(("127.0.0.1", self.public[0]), 1).close()
                    return
                brokers = (
                    AdminClient({"bootstrap.servers": self.bootstrap})
                    .list_topics(timeout=3)
                    .brokers
                )
                if brokers:
                    return
            time.sleep(0.3)
        raise AssertionError("HAProxy does not answer")

    def stop(self) -> None:
        if self.haproxy is not None:
            self.haproxy.terminate()
            self.haproxy.wait(10)
        for gateway in self.gateways:
            gateway.stop()


@pytest.fixture(scope="module")
def fleet(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    fleet = Fleet(kafka_cluster, tmp_path_factory.mktemp("fleet"))
    try:
        fleet.start()
        yield fleet
    finally:
        fleet.stop()


class Traffic:
    """One producer (acks=all, idempotent) and one consumer, each in its own thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self.consumed: set[bytes] = set()
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.producer = threading.Thread(target=self._produce, daemon=True)
        self.consumer = threading.Thread(target=self._consume, daemon=True)

    def _produce(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 1000,
        })  # fmt: skip

        def report(err: Any, message: Any) -> None:
            if err is None:
                self.acked.add(message.value())
            else:
                self.failed.append(str(err))

        sequence = 0
        while not self.stop_producing.is_set():
            producer.produce(self.topic, key=str(sequence % 12), value=f"r{sequence}".encode(),
                             on_delivery=report)  # fmt: skip
            sequence += 1
            producer.poll(0.005)
        assert producer.flush(120) == 0

    def _consume(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"fleet-{self.topic}",
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
        })  # fmt: skip
        consumer.subscribe([self.topic])
        while not self.stop_consuming.is_set():
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value():
                self.consumed.add(message.value())
        consumer.close()


def test_rolling_restart_loses_no_acknowledged_record(fleet: Fleet) -> None:
    topic = f"fleet-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    traffic = Traffic(fleet.bootstrap, topic)
    traffic.consumer.start()
    traffic.producer.start()
    time.sleep(3)
    served = []
    for gateway, port in zip(fleet.gateways, fleet.metrics_ports, strict=True):
        before = len(traffic.acked)
        served.append(connections_served(port))
        assert gateway.stop(timeout=30) == 0, gateway.log_tail()  # SIGTERM: drained, exit 0
        gateway.start(expected_brokers=None)
        wait_ready(port)
        time.sleep(3)  # HAProxy marks it up again (rise 2 x 500 ms); traffic continues
        assert len(traffic.acked) > before, "production stalled during the restart"
    time.sleep(2)
    traffic.stop_producing.set()
    traffic.producer.join(150)
    assert not traffic.producer.is_alive()
    deadline = time.monotonic() + 90
    while not traffic.acked <= traffic.consumed and time.monotonic() < deadline:
        time.sleep(0.5)
    traffic.stop_consuming.set()
    traffic.consumer.join(30)
    lost = traffic.acked - traffic.consumed
    assert len(traffic.acked) > 500
    assert not lost, f"{len(lost)} acknowledged records never consumed, e.g. {sorted(lost)[:5]}"
    assert not traffic.failed, traffic.failed[:5]
    assert sum(1 for count in served if count > 0) >= 2, served  # the balancer spread clients


# -- one tenant across the fleet: shared credentials, converging policies, suspension ------


@pytest.fixture(scope="module")
def tenant_fleet(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("tenant-fleet")
    redis = RedisServer(work)
    redis.start()
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("# managed by kgw tenant\n")
    fleet = Fleet(
        kafka_cluster, work, authenticated=True,
        sasl={"mechanisms": ["PLAIN"], "credential_store": {"redis_url": redis.url}},
        authorization={"policy_dir": str(policy_dir), "redis": {"url": redis.url}},
        quotas={"redis_url": redis.url, "expected_instances": INSTANCES,
                "plans": {"starter": {"max_topics": 5}}},
    )  # fmt: skip
    try:
        fleet.start()
        yield fleet
    finally:
        fleet.stop()
        redis.stop()


async def _authenticated(address: str, key_id: str, secret: str) -> RawConnection:
    conn = await RawConnection.open(address)
    hs = await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert hs.error_code == 0
    token = b"\0" + key_id.encode() + b"\0" + secret.encode()
    auth = await conn.request(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
    assert auth.error_code == 0, auth.error_message
    return conn


def test_a_tenant_across_the_fleet_is_suspended_everywhere(
    tenant_fleet: Fleet, tmp_path: Path
) -> None:
    fleet, name = tenant_fleet, f"f{uuid.uuid4().hex[:6]}"
    config_path = fleet.gateways[0].config_path
    bundle = tmp_path / "bundle"
    made = subprocess.run(
        [sys.executable, "-m", "gateway", "tenant", "create", name, "--plan", "starter",
         "--config", str(config_path), "--bundle-dir", str(bundle), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    conf = json.loads((bundle / "confluent-kafka.json").read_text())
    assert conf["bootstrap.servers"] == fleet.bootstrap  # the balancer, not an instance
    time.sleep(1.0)  # the other instances' policy poll (notices make it faster)
    topic = f"{name}.events"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(30):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0  # broker connections spread over the instances

    async def scenario() -> float:
        direct = [f"127.0.0.1:{g.listener['bootstrap_port']}" for g in fleet.gateways]
        conns = [await _authenticated(a, created["api_key"], created["secret"]) for a in direct]
        stores = stores_for(load_config(config_path))
        started = time.monotonic()
        await onboard.set_state(stores, name, "suspended", actor="test")
        closed = await asyncio.gather(*(c.closed_by_peer(3.0) for c in conns))
        elapsed = time.monotonic() - started
        for conn in conns:
            conn.close()
        await stores.credentials.close()
        await stores.tenants.close()
        assert all(closed), f"still open on instances {[i for i, c in enumerate(closed) if not c]}"
        return elapsed

    elapsed = asyncio.run(scenario())
    assert elapsed < 1.0, f"the last instance closed after {elapsed:.2f}s"
    errors: list[KafkaError] = []
    refused = AdminClient({**conf, "error_cb": errors.append})
    with contextlib.suppress(Exception):
        refused.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        refused.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
