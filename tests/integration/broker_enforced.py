"""Reusable pieces for tests where the brokers enforce tenant separation themselves
(decision 0026): a SASL cluster running KRaft's ``StandardAuthorizer``, a gateway
factory for it with ``upstream.tenant_identities`` on, and tenants onboarded with
``kgw tenant create``. Every credential is generated here, at run time.

Use from a test module::

    from .broker_enforced import (  # noqa: F401 - the fixtures enforced_cluster, enforced_stack
        EnforcedStack, enforced_cluster_fixture, enforced_stack_fixture,
    )

    def test_x(enforced_stack: EnforcedStack) -> None:
        a, b = enforced_stack.tenants            # two onboarded tenants
        a.client()                               # confluent-kafka settings for tenant a
        enforced_stack.admin()                   # AdminClient on the cluster as ``admin``

``enforced_stack`` starts its gateway with ``authorization.gateway_checks: false`` (only
the brokers decide); ``EnforcedStack.start_gateway(gateway_checks=True)`` starts another
on the same stores, reached with ``a.client(**{"bootstrap.servers":
EnforcedStack.sasl_bootstrap_of(gw)})``. Each gateway's first listener is ``local``
(plaintext, ``User:dev-admin``, a super user: the gateway's own broker identity), the
second the tenants' SASL PLAIN listener. A 3-node cluster: ``make_cluster(dir, nodes=3)``.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import gateway_log_events, sasl_listener
from ..loopback import socket_inodes

POLICIES = Path(__file__).resolve().parents[2] / "policies"
GATEWAY_USER = "kgw-admin"
OPERATOR = "User:dev-admin"  # the plaintext ``local`` listener: a super user
SYNC_S = 1.0  # upstream.tenant_identities.acl_sync_interval_s in these tests


@dataclass
class Tenant:
    name: str
    prefix: str
    username: str
    secret: str
    bootstrap: str

    def client(self, **more: Any) -> dict[str, Any]:
        """confluent-kafka settings for this tenant through the gateway (SASL PLAIN)."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": self.username,
            "sasl.password": self.secret,
            **more,
        }

    def topic(self, label: str = "t") -> str:
        return f"{self.prefix}{label}-{uuid.uuid4().hex[:6]}"


class EnforcedStack:
    """A cluster with an authorizer, its gateway and two tenants ``a`` and ``b``."""

    def __init__(self, cluster: KafkaCluster, workdir: Path, gateway_password: str) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.gateway_password = gateway_password
        self.policy_dir = workdir / "policies"
        self.policy_dir.mkdir()
        shutil.copy(POLICIES / "model.conf", self.policy_dir / "model.conf")
        (self.policy_dir / "policy.csv").write_text("# managed by kgw tenant\n")
        secret = workdir / "tenant-upstream.secret"
        secret.touch(mode=0o600)
        secret.write_text(secrets.token_urlsafe(48) + "\n")
        password = workdir / "upstream.pass"
        password.touch(mode=0o600)
        password.write_text(gateway_password + "\n")
        self.gateways: list[GatewayProcess] = []
        self.tenants: list[Tenant] = []

    def config(self, gateway_checks: bool) -> dict[str, Any]:
        bootstrap, base = pick_ports()
        local = dev_config(self.cluster.bootstrap_servers, bootstrap, base)["listeners"][0]
        local["principal"] = OPERATOR
        work = self.workdir
        return dev_config(
            self.cluster.bootstrap_servers, bootstrap, base,
            listeners=[local, sasl_listener()],  # local first: the readiness probe
            sasl={
                "mechanisms": ["PLAIN"],
                "credential_store": {"file": str(work / "credentials.json")},
                "failure_limiter": {"max_failures": 100, "base_delay_s": 0.05, "max_delay_s": 0.1},
            },
            authorization={
                "policy_dir": str(self.policy_dir), "reload_interval_s": 0.25,
                "super_users": [OPERATOR], "gateway_checks": gateway_checks,
            },
            quotas={
                "store_file": str(work / "quotas.json"), "settings_refresh_s": 0.5,
                "plans": {"starter": {"max_topics": 20, "max_partitions_per_topic": 6}},
            },
            metrics={"enabled": True, "bind_host": "127.0.0.1", "port": pick_ports(span=1)[0]},
        ) | {
            "upstream": {
                "bootstrap_servers": self.cluster.bootstrap_servers.split(","),
                "metadata_refresh_s": 2.0,
                "connect_timeout_s": 10,
                "sasl": {
                    "mechanism": "SCRAM-SHA-512", "username": GATEWAY_USER,
                    "password_file": str(work / "upstream.pass"), "timeout_s": 5,
                },
                "tenant_identities": {
                    "secret_file": str(work / "tenant-upstream.secret"),
                    "acl_sync_interval_s": SYNC_S,
                },
            },
        }  # fmt: skip

    def start_gateway(self, gateway_checks: bool = False) -> GatewayProcess:
        index = len(self.gateways)
        gateway = GatewayProcess(self.workdir / f"gw{index}", self.config(gateway_checks))
        self.gateways.append(gateway)
        gateway.start(expected_brokers=len(self.cluster.brokers))
        return gateway

    @property
    def gateway(self) -> GatewayProcess:
        return self.gateways[0]

    @property
    def sasl_bootstrap(self) -> str:
        """The tenants' (SASL) listener of the first gateway."""
        return self.sasl_bootstrap_of(self.gateway)

    @staticmethod
    def sasl_bootstrap_of(gateway: GatewayProcess) -> str:
        """The tenants' (SASL) listener of ``gateway`` (its ``local`` listener is first)."""
        listener = gateway.config["listeners"][1]
        return f"{listener['advertised_host']}:{listener['bootstrap_port']}"

    def onboard(self, name: str) -> Tenant:
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "tenant", "create", name, "--plan", "starter",
             "--bundle-dir", str(self.workdir / f"bundle-{name}"), "--json",
             "--config", str(self.gateway.config_path)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        created = json.loads(done.stdout)
        bundle = json.loads((self.workdir / f"bundle-{name}" / "confluent-kafka.json").read_text())
        tenant = Tenant(
            name, created["prefix"], bundle["sasl.username"], bundle["sasl.password"],
            self.sasl_bootstrap,
        )  # fmt: skip
        self.tenants.append(tenant)
        return tenant

    def admin(self) -> AdminClient:
        """The cluster itself, as its ``admin`` super user (not through the gateway)."""
        return AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers,
                            **self.cluster.client_config})  # fmt: skip

    def create_topic(self, name: str, partitions: int = 1) -> None:
        admin = self.admin()  # referenced until the result is in
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.stop()


def make_cluster(workdir: Path, nodes: int = 1) -> tuple[KafkaCluster, str]:
    """A SASL_PLAINTEXT cluster (SCRAM-SHA-512 for the gateway, PLAIN too) whose brokers
    run ``StandardAuthorizer``; the gateway's login is a super user."""
    password = secrets.token_hex(16)
    cluster = KafkaCluster(
        workdir, nodes=nodes, heap="384m", security_protocol="SASL_PLAINTEXT",
        sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"), sasl_users={GATEWAY_USER: password},
        acl_super_users=(f"User:{GATEWAY_USER}",),
    )  # fmt: skip
    return cluster, password


@pytest.fixture(scope="module", name="enforced_cluster")
def enforced_cluster_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KafkaCluster, str]]:
    cluster, password = make_cluster(tmp_path_factory.mktemp("kafka-acl"))
    cluster.start()
    try:
        yield cluster, password
    finally:
        cluster.stop()


@pytest.fixture(scope="module", name="enforced_stack")
def enforced_stack_fixture(
    enforced_cluster: tuple[KafkaCluster, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EnforcedStack]:
    cluster, password = enforced_cluster
    stack = EnforcedStack(cluster, tmp_path_factory.mktemp("enforced"), password)
    try:
        stack.start_gateway(gateway_checks=False)
        for name in (f"a{uuid.uuid4().hex[:5]}", f"b{uuid.uuid4().hex[:5]}"):
            stack.onboard(name)
        yield stack
    finally:
        stack.stop()


def upstream_sockets(pid: int, broker_ports: set[int]) -> int:
    """How many established TCP connections process ``pid`` holds to ``broker_ports``."""
    inodes = socket_inodes(pid)
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[3] == "01" and fields[9] in inodes and remote_port in broker_ports:
                    count += 1
    return count


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout:g}s: {what}")


__all__ = [
    "EnforcedStack", "Tenant", "enforced_cluster_fixture", "enforced_stack_fixture",
    "gateway_log_events",
    "make_cluster", "upstream_sockets", "wait_for",
]  # fmt: skip
