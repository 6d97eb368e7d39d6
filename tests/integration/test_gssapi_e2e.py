"""GSSAPI (Kerberos) through the gateway with real clients: a throwaway MIT realm
(k5test + Debian's krb5-kdc) made here, the gateway's service keytab, client
principals with keytabs, kafka-python and Kafka's own Java tools (JAAS
Krb5LoginModule) producing and consuming; principal-to-local rules seen by the
access log and by authorization; expired tickets and unmapped principals refused.

A missing KDC, ``gssapi`` or Java Kerberos login makes these tests fail, never skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gssapi
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from k5test import K5Realm
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.loopback import KDC_ON_LOOPBACK
from tests.redis_server import free_port

from ..conftest import gateway_log_events
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration
REALM = "KGW.TEST"
HOST = "127.0.0.1"  # the gateway's advertised host
POLICIES = Path(__file__).parents[2] / "policies"
RULES = [
    r"RULE:[1:$1@$0](alice@KGW\.TEST)s/(.*)@KGW\.TEST/tenant-a.$1/",
    r"RULE:[1:$1@$0](bob@KGW\.TEST)s/(.*)@KGW\.TEST/tenant-b.$1/",
]  # mallory@KGW.TEST matches no rule
POLICY = [
    "p, User:tenant-a.alice, TOPIC, PREFIXED, tenant-a., ALL, *, allow",
    "p, User:tenant-a.alice, GROUP, PREFIXED, tenant-a., ALL, *, allow",
    "p, User:tenant-b.bob, TOPIC, PREFIXED, tenant-b., ALL, *, allow",
    "p, User:tenant-b.bob, GROUP, PREFIXED, tenant-b., ALL, *, allow",
]
TOOLS = ("/usr/sbin/kdb5_util", "/usr/sbin/krb5kdc", "/usr/sbin/kadmin.local", "/usr/bin/kinit")


class Kdc:
    """The realm, the gateway's service keytab and one keytab per client principal."""

    def __init__(self, realm: K5Realm) -> None:
        self.realm = realm
        self.dir = Path(realm.tmpdir)
        self.krb5_conf = Path(realm.env["KRB5_CONFIG"])
        self.service_keytab = self.dir / "gateway.keytab"

    def add_service(self, principal: str) -> None:
        self.realm.addprinc(principal)  # random key
        self.realm.extract_keytab(principal, str(self.service_keytab))

    def add_user(self, name: str) -> Path:
        keytab = self.dir / f"{name}.keytab"
        self.realm.addprinc(f"{name}@{REALM}", secrets.token_urlsafe(18))
        self.realm.extract_keytab(f"{name}@{REALM}", str(keytab))
        return keytab

    def ccache(self, name: str, lifetime: str = "10m") -> Path:
        """A fresh credential cache for ``name``, from its keytab (kinit -k)."""
        path = self.dir / f"cc-{name}-{time.monotonic_ns()}"
        self.realm.kinit(
            f"{name}@{REALM}",
            flags=["-k", "-t", str(self.dir / f"{name}.keytab"), "-l", lifetime, "-c", str(path)],
            verbose=False,
        )
        return path

    def env(self) -> dict[str, str]:
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": self.realm.env["KRB5_KDC_PROFILE"],
            "KRB5RCACHEDIR": str(self.dir),
        }


@pytest.fixture(scope="module")
def kdc() -> Iterator[Kdc]:
    missing = [tool for tool in TOOLS if not Path(tool).exists()]
    if missing:
        raise RuntimeError(f"krb5 tools missing (Debian krb5-kdc, krb5-user): {missing}")
    realm = K5Realm(
        realm=REALM,
        portbase=free_port(),
        krb5_conf={
            "libdefaults": {
                "dns_canonicalize_hostname": "false",
                "rdns": "false",
                "clockskew": "1",
                "udp_preference_limit": "1",  # TCP: the same path for MIT and Java
            },
            "realms": {
                "$realm": {
                    "kdc": "127.0.0.1:$port0",
                    "admin_server": "127.0.0.1:$port1",
                    "kpasswd_server": "127.0.0.1:$port2",
                }
            },
        },
        kdc_conf=KDC_ON_LOOPBACK,
        create_host=False,
        get_creds=False,
    )
    try:
        kdc = Kdc(realm)
        # Python clients ask for kafka/<host they dial>; Java resolves 127.0.0.1 to its name
        kdc.add_service(f"kafka/{HOST}@{REALM}")
        kdc.add_service(f"kafka/localhost@{REALM}")
        for user in ("alice", "bob", "mallory"):
            kdc.add_user(user)
        yield kdc
    finally:
        realm.stop()
        shutil.rmtree(realm.tmpdir, ignore_errors=True)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def gssapi_gateway(
    kdc: Kdc, kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("gw-gssapi")
    policy_dir = workdir / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("\n".join(POLICY) + "\n")
    bootstrap, base = pick_ports()
    listener = {
        "name": "kerberos", "bind_host": HOST, "bootstrap_port": bootstrap,
        "broker_port_base": base, "advertised_host": HOST, "max_node_id": 16,
        "authentication": "sasl",
    }  # fmt: skip
    config = dev_config(
        kafka_cluster.bootstrap_servers, bootstrap, base,
        listeners=[listener],
        sasl={
            "mechanisms": ["GSSAPI"],
            "kerberos": {
                "keytab": str(kdc.service_keytab),
                "default_realm": REALM,  # no service_principal: both keys in the keytab
                "principal_to_local_rules": RULES,
            },
            "failure_limiter": {"max_failures": 50, "base_delay_s": 0.1, "max_delay_s": 0.5},
        },
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        accesslog={"path": str(workdir / "access" / "access.log")},
    )  # fmt: skip
    gateway = GatewayProcess(workdir, config)
    with environment(kdc.env()):  # the gateway process inherits the realm's krb5.conf
        gateway.start(expected_brokers=None)
    try:
        yield gateway
    finally:
        gateway.stop()


def _create_topic(cluster: KafkaCluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)


def _access_records(gateway: GatewayProcess) -> list[dict[str, Any]]:
    directory = Path(gateway.config["accesslog"]["path"]).parent
    records = []
    for path in sorted(directory.glob("*")):
        records.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return records


def _wait_records(
    gateway: GatewayProcess, want: Any, timeout: float = 20, enough: Any = bool
) -> list[dict[str, Any]]:
    """The access-log records ``want`` picks, once ``enough`` of them are written (the
    log is written in batches: the first may come before the rest)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in _access_records(gateway) if want(r)]
        if enough(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _kafka_python(gateway: GatewayProcess, kind: str, **more: Any) -> Any:
    from kafka import KafkaConsumer, KafkaProducer

    conf: dict[str, Any] = {
        "bootstrap_servers": gateway.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
        **more,
    }
    return KafkaProducer(**conf) if kind == "producer" else KafkaConsumer(**conf)


def test_kafka_python_produces_and_consumes_as_the_mapped_principal(
    gssapi_gateway: GatewayProcess, kdc: Kdc, kafka_cluster: KafkaCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    topic = f"tenant-a.kpy-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic)
    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.ccache('alice')}")
    producer = _kafka_python(gssapi_gateway, "producer", acks="all")
    try:
        for i in range(10):
            producer.send(topic, f"kpy-{i}".encode()).get(timeout=30)
    finally:
        producer.close()
    consumer = _kafka_python(
        gssapi_gateway, "consumer", group_id=f"tenant-a.g-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest", consumer_timeout_ms=20000,
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 10:
                break
    finally:
        consumer.close()
    assert values == [f"kpy-{i}".encode() for i in range(10)]

    auths = [
        e for e in gateway_log_events(gssapi_gateway, "authentication")
        if e["outcome"] == "success" and e["mechanism"] == "GSSAPI"
    ]  # fmt: skip
    assert auths and {e["principal"] for e in auths} == {"User:tenant-a.alice"}
    produced = _wait_records(
        gssapi_gateway, lambda r: r.get("api") == "produce" and topic in (r.get("topics") or [])
    )
    assert produced, "the access log records the produce requests"
    for record in produced:
        assert record["principal"] == "User:tenant-a.alice"
        assert record["sasl_mechanism"] == "GSSAPI" and record["decision"] == "allow"


def test_aiokafka_produces_with_a_ticket(
    gssapi_gateway: GatewayProcess, kdc: Kdc, kafka_cluster: KafkaCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from aiokafka import AIOKafkaProducer

    topic = f"tenant-a.aio-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic)
    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.ccache('alice')}")

    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=gssapi_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka", acks="all",
        )  # fmt: skip
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"aio-{i}".encode())
        finally:
            await producer.stop()

    asyncio.run(produce())
    records = _wait_records(
        gssapi_gateway,
        lambda r: r.get("api") == "produce" and topic in (r.get("topics") or []),
        enough=lambda found: sum(int(r["records"] or 0) for r in found) >= 5,
    )
    assert sum(int(r["records"] or 0) for r in records) == 5
    assert {r["principal"] for r in records} == {"User:tenant-a.alice"}


def test_authorization_sees_the_mapped_principal(
    gssapi_gateway: GatewayProcess, kdc: Kdc, kafka_cluster: KafkaCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from kafka.errors import KafkaTimeoutError, TopicAuthorizationFailedError

    theirs = f"tenant-a.only-{uuid.uuid4().hex[:8]}"
    own = f"tenant-b.own-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, theirs)
    _create_topic(kafka_cluster, own)
    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.ccache('bob')}")
    producer = _kafka_python(gssapi_gateway, "producer", max_block_ms=8000)
    try:
        producer.send(own, b"mine").get(timeout=30)  # tenant-b.bob may write tenant-b.*
        # tenant-a.* is not bob's: refused (kafka-python keeps retrying the denied metadata)
        with pytest.raises((TopicAuthorizationFailedError, KafkaTimeoutError)):
            producer.send(theirs, b"not yours").get(timeout=30)
    finally:
        producer.close(timeout=5)
    allowed = _wait_records(
        gssapi_gateway, lambda r: r.get("api") == "produce" and own in (r.get("topics") or [])
    )
    assert allowed and {r["principal"] for r in allowed} == {"User:tenant-b.bob"}
    assert {r["decision"] for r in allowed} == {"allow"}
    denied = _wait_records(
        gssapi_gateway,
        lambda r: r.get("type") == "request" and r.get("decision") in ("deny", "partial")
        and theirs in (r.get("topics") or []),
    )  # fmt: skip
    assert denied, "bob's requests for tenant A's topic are denied"
    assert {r["principal"] for r in denied} == {"User:tenant-b.bob"}
    assert {r["error_code"] for r in denied} == {29}  # TOPIC_AUTHORIZATION_FAILED


def _java_tool(
    kdc: Kdc, tool: str, args: list[str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    argv = kafka_dist.jvm_argv(
        kafka_dist.ensure_kafka(), kafka_dist.tool_main_class(tool), args,
        jvm_opts=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
    )  # fmt: skip
    return subprocess.run(
        argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, timeout=180, check=False,
    )  # fmt: skip


def test_java_tools_with_a_keytab(
    gssapi_gateway: GatewayProcess, kdc: Kdc, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"tenant-a.java-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic)
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=GSSAPI\n"
        "sasl.kerberos.service.name=kafka\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required "
        f'useKeyTab=true storeKey=true keyTab="{kdc.dir / "alice.keytab"}" '
        f'principal="alice@{REALM}";\n'
    )
    produced = _java_tool(kdc, "console-producer", [
        "--bootstrap-server", gssapi_gateway.bootstrap, "--topic", topic,
        "--producer.config", str(props),
    ], stdin=b"one\ntwo\nthree\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumed = _java_tool(kdc, "console-consumer", [
        "--bootstrap-server", gssapi_gateway.bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", "3", "--timeout-ms", "30000", "--consumer.config", str(props),
        "--group", f"tenant-a.java-{uuid.uuid4().hex[:6]}",
    ])  # fmt: skip
    assert consumed.stdout.decode().split() == ["one", "two", "three"], consumed.stderr[-2000:]
    records = _wait_records(
        gssapi_gateway, lambda r: r.get("api") == "produce" and topic in (r.get("topics") or [])
    )
    assert records and {r["principal"] for r in records} == {"User:tenant-a.alice"}


def test_an_unmapped_principal_is_refused(
    gssapi_gateway: GatewayProcess, kdc: Kdc, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """mallory has a valid ticket but no rule maps her: SASL_AUTHENTICATION_FAILED."""
    from kafka.errors import KafkaError

    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.ccache('mallory')}")
    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaError):  # kafka-python retries, then gives up bootstrapping
        _kafka_python(
            gssapi_gateway, "producer", bootstrap_timeout_ms=6000, reconnect_backoff_max_ms=500
        ).close()
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "Authentication failed: Kerberos authentication failed" in caplog.text
    failures = [
        e for e in gateway_log_events(gssapi_gateway, "authentication")
        if e["outcome"] == "failure" and e.get("principal") == f"mallory@{REALM}"
    ]  # fmt: skip
    assert failures and {e["reason"] for e in failures} == {"no_matching_rule"}
    refused = _wait_records(
        gssapi_gateway,
        lambda r: r.get("type") == "connection" and r.get("event") == "auth"
        and r.get("outcome") == "failure" and r.get("reason") == "no_matching_rule",
    )  # fmt: skip
    assert refused, "each refused attempt is an access-log record"


async def _raw_gssapi(address: str, token: bytes) -> tuple[SaslAuthenticateResponse, bool]:
    conn = await RawConnection.open(address)
    try:
        handshake = await conn.request(
            SaslHandshakeRequest(mechanism="GSSAPI"), SaslHandshakeResponse
        )
        assert handshake.error_code == ErrorCode.none and "GSSAPI" in handshake.mechanisms
        answer = await conn.request(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        return answer, await conn.closed_by_peer(10)
    finally:
        conn.close()


def test_an_expired_ticket_is_refused(
    gssapi_gateway: GatewayProcess, kdc: Kdc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients check their own tickets before sending, so a hand-driven Kafka
    exchange sends the AP-REQ made while the ticket was valid, after it expired."""
    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    ccache = kdc.ccache("alice", lifetime="3s")
    creds = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{ccache}"})
    service = gssapi.Name(f"kafka@{HOST}", gssapi.NameType.hostbased_service)
    token = gssapi.SecurityContext(name=service, creds=creds, usage="initiate").step(None)
    assert token
    time.sleep(5.5)  # past the ticket's end plus the realm's 1 s clock skew
    answer, closed = asyncio.run(_raw_gssapi(gssapi_gateway.bootstrap, token))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Kerberos authentication failed"
    assert closed
    failures = [
        e for e in gateway_log_events(gssapi_gateway, "authentication")
        if e["outcome"] == "failure" and e.get("reason") == "ticket_expired"
    ]  # fmt: skip
    assert failures and failures[-1]["mechanism"] == "GSSAPI"
