"""Fetch sessions through the gateway with real consumers, through a policy change.

A Java consumer (incremental fetch sessions, KIP-227) and a librdkafka consumer read
two topics; mid-stream the principal loses READ on one of them. The other keeps
flowing, the lost one stops (nothing produced after the change is read), and the
Java client's fetch session is never broken (no INVALID_FETCH_SESSION_EPOCH, no
session closed by the "broker"), while another tenant's consumer, logged in over SASL
on the same listener and so on the same broker ports, reads on unaffected.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.credentials import CredentialStoreConfig, open_store
from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess

from ..conftest import GatewayFactory, sasl_listener
from .test_authorization import _listener

pytestmark = pytest.mark.integration
POLICIES = Path(__file__).parents[2] / "policies"
JAVA_CONSUMER = Path(__file__).parent / "java" / "SessionConsumer.java"
LOSE = "p, User:a-app, TOPIC, LITERAL, tenant-a.lose, ALL, *, allow"
POLICY = [
    "p, User:a-app, TOPIC, LITERAL, tenant-a.keep, ALL, *, allow",
    LOSE,
    "p, User:a-app, GROUP, PREFIXED, tenant-a., ALL, *, allow",
    "p, User:b-app, TOPIC, PREFIXED, tenant-b., ALL, *, allow",
    "p, User:b-app, GROUP, PREFIXED, tenant-b., ALL, *, allow",
]
LOG4J = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %p %c: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.fsh.name = org.apache.kafka.clients.FetchSessionHandler
logger.fsh.level = DEBUG
"""
BROKEN_SESSION = re.compile(
    r"was unable to process the fetch request|incremental fetch response closing session"
    r"|invalid incremental fetch response|INVALID_FETCH_SESSION_EPOCH|FETCH_SESSION_ID_NOT_FOUND"
)
BATCH = 200


class Stack:
    """One SASL listener for both tenants (API keys made here), a plaintext admin one."""

    def __init__(
        self, gateway: GatewayProcess, policy_file: Path, keys: dict[str, tuple[str, str]]
    ) -> None:
        self.gateway = gateway
        self.policy_file = policy_file
        self.keys = keys  # principal -> (key id, secret)
        listeners = {lst["name"]: lst for lst in gateway.config["listeners"]}
        self.tenants = f"127.0.0.1:{listeners['tenants']['bootstrap_port']}"
        self.admin = f"127.0.0.1:{listeners['admin']['bootstrap_port']}"

    def client(self, principal: str) -> dict[str, str]:
        key_id, secret = self.keys[principal]
        return {
            "bootstrap.servers": self.tenants, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": key_id, "sasl.password": secret,
        }  # fmt: skip

    def java_properties(self, principal: str, directory: Path) -> Path:
        """The Java client's SASL settings, in a file only its owner reads."""
        key_id, secret = self.keys[principal]
        path = directory / f"{principal.split(':')[1]}.properties"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                f'required username="{key_id}" password="{secret}";\n'
            )
        return path

    def revoke_lose(self) -> None:
        lines = [line for line in POLICY if line != LOSE]
        self.policy_file.write_text("\n".join(lines) + "\n")
        time.sleep(1.5)  # reload_interval_s is 0.25

    def restore(self) -> None:
        self.policy_file.write_text("\n".join(POLICY) + "\n")
        time.sleep(1.5)


@pytest.fixture(scope="module")
def stack(gateway_factory: GatewayFactory, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    work = tmp_path_factory.mktemp("fetch-sessions")
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("\n".join(POLICY) + "\n")
    store = open_store(CredentialStoreConfig(file=work / "credentials.json"))

    async def keys() -> dict[str, tuple[str, str]]:
        made = {}
        for principal, tenant in (("User:a-app", "tenant-a"), ("User:b-app", "tenant-b")):
            key, secret = await store.create_api_key(
                principal=principal, tenant=tenant, actor="test"
            )
            made[principal] = (key.key_id, secret)
        return made

    made = asyncio.run(keys())
    gateway = gateway_factory(
        listeners=[_listener("admin", "User:admin"), sasl_listener()],
        sasl={
            "mechanisms": ["PLAIN"],
            "credential_store": {"file": str(work / "credentials.json")},
        },
        authorization={
            "policy_dir": str(policy_dir),
            "reload_interval_s": 0.25,
            "super_users": ["User:admin"],
        },
    )
    return Stack(gateway, policy_dir / "policy.csv", made)


@pytest.fixture
def restored(stack: Stack) -> Iterator[Stack]:
    yield stack
    stack.restore()


def _topics(admin_bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=3, replication_factor=3) for n in names]
    )
    for future in futures.values():
        future.result(30)


def _produce(bootstrap: str, topics: list[str], count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[KafkaError] = []
    for topic in topics:
        for i in range(count):
            producer.produce(
                topic, value=b"x" * 100, key=str(i).encode(),
                on_delivery=lambda e, _m: e is not None and failures.append(e),
            )  # fmt: skip
    assert producer.flush(60) == 0 and not failures, failures


class JavaConsumer:
    """SessionConsumer.java in a JVM; its counts read from stdout as they come."""

    def __init__(
        self, bootstrap: str, partitions: list[str], log4j: Path, seconds: int, props: Path
    ) -> None:
        libs = kafka_dist.ensure_kafka()
        args = [bootstrap, str(seconds), ",".join(partitions), str(props)]
        argv = kafka_dist.jvm_argv(libs, str(JAVA_CONSUMER), args, log4j_config=log4j)
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.counts: dict[str, int] = {}
        self.authz: list[str] = []
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errors = threading.Thread(target=self._read_stderr, daemon=True)
        self._errors.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(("COUNTS ", "DONE ")):
                pairs = re.findall(r"([\w.-]+)=(\d+)", line)
                self.counts = {topic: int(n) for topic, n in pairs}
            elif line.startswith("AUTHZ "):
                self.authz.append(line.strip())

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def wait_for(self, wanted: dict[str, int], seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(self.counts.get(t, 0) >= n for t, n in wanted.items()):
                return
            assert self.process.poll() is None, f"consumer exited: {self.stderr[-2000:]}"
            time.sleep(0.2)
        raise AssertionError(f"wanted {wanted}, read {self.counts}")

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(30)
        self._errors.join(10)
        self._reader.join(10)
        return self.stderr


def _partitions(topic: str) -> list[str]:
    return [f"{topic}:{p}" for p in range(3)]


def test_java_consumers_keep_their_sessions_through_a_revocation(
    restored: Stack, tmp_path: Path
) -> None:
    stack = restored
    _topics(stack.admin, "tenant-a.keep", "tenant-a.lose", "tenant-b.data")
    _produce(stack.admin, ["tenant-a.keep", "tenant-a.lose", "tenant-b.data"], BATCH)
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J)
    a = JavaConsumer(
        stack.tenants, _partitions("tenant-a.keep") + _partitions("tenant-a.lose"), log4j, 240,
        stack.java_properties("User:a-app", tmp_path),
    )  # fmt: skip
    b = JavaConsumer(
        stack.tenants, _partitions("tenant-b.data"), log4j, 240,
        stack.java_properties("User:b-app", tmp_path),
    )  # fmt: skip
    try:
        a.wait_for({"tenant-a.keep": BATCH, "tenant-a.lose": BATCH})
        b.wait_for({"tenant-b.data": BATCH})
        stack.revoke_lose()
        _produce(stack.admin, ["tenant-a.keep", "tenant-a.lose", "tenant-b.data"], BATCH)
        a.wait_for({"tenant-a.keep": 2 * BATCH})
        b.wait_for({"tenant-b.data": 2 * BATCH})
        time.sleep(2)  # more incremental fetches with the refused partitions in the session
    finally:
        a_log, b_log = a.stop(), b.stop()
    assert a.counts.get("tenant-a.lose") == BATCH  # nothing produced after the revocation
    assert any("tenant-a.lose" in line for line in a.authz), a.authz[-3:]
    for log in (a_log, b_log):
        assert "Built incremental fetch" in log  # sessions were really used
        broken = BROKEN_SESSION.findall(log)
        assert not broken, broken[:5]


def test_librdkafka_consumers_keep_reading_through_a_revocation(restored: Stack) -> None:
    stack = restored
    _topics(stack.admin, "tenant-a.keep2", "tenant-a.lose2")
    lines = [*POLICY, "p, User:a-app, TOPIC, LITERAL, tenant-a.keep2, ALL, *, allow"]
    lose = "p, User:a-app, TOPIC, LITERAL, tenant-a.lose2, ALL, *, allow"
    stack.policy_file.write_text("\n".join([*lines, lose]) + "\n")
    time.sleep(1.5)
    _produce(stack.admin, ["tenant-a.keep2", "tenant-a.lose2"], BATCH)
    consumer = Consumer({
        **stack.client("User:a-app"), "group.id": "tenant-a.rd", "enable.auto.commit": False,
        "fetch.wait.max.ms": 200,
    })  # fmt: skip
    consumer.assign(
        [TopicPartition(t, p, 0) for t in ("tenant-a.keep2", "tenant-a.lose2") for p in range(3)]
    )
    counts: dict[str, int] = {}
    errors: list[int] = []

    def read_until(wanted: dict[str, int], seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(counts.get(t, 0) >= n for t, n in wanted.items()):
                return
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error().code())
                continue
            counts[message.topic()] = counts.get(message.topic(), 0) + 1
        raise AssertionError(f"wanted {wanted}, read {counts}")

    try:
        read_until({"tenant-a.keep2": BATCH, "tenant-a.lose2": BATCH})
        stack.policy_file.write_text("\n".join(lines) + "\n")
        time.sleep(1.5)
        _produce(stack.admin, ["tenant-a.keep2", "tenant-a.lose2"], BATCH)
        read_until({"tenant-a.keep2": 2 * BATCH})
    finally:
        consumer.close()
    assert counts.get("tenant-a.lose2") == BATCH
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
