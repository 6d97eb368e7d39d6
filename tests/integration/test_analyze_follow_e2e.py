"""``kgw analyze --follow`` on the access-log topic a real gateway writes (issue 17).

One story on the shared 3-node cluster: a gateway with SASL PLAIN, casbin policies,
an audit trail and its access log in a file and on a topic; a tenant onboarded with
``kgw tenant create``; the follower (a ``kgw analyze --follow`` child process with
Spark's Kafka source) alerting a plain HTTP webhook and Debian's Alertmanager, both
on loopback, and with a response policy that blocks the address of a brute force.

- a brute force from 127.0.0.2 (wrong secrets for a key) is found within 60 s of its
  last failure, alerted to both receivers, and its address blocked by a DENY rule
  (through ``kgw policy add``, in the audit trail): a right login from that address is
  then denied its topic, while the tenant keeps producing from 127.0.0.1;
- the follower stopped, a password spray from 127.0.0.3 while it is down, restarted
  from its checkpoint: the spray is found (not lost), no finding is emitted twice;
- the temporary block expires and is lifted (``kgw policy remove``);
- ``kgw analyze`` (batch) on the gateway's access-log file reports the brute force,
  the spray and the topic probing by the new key.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.types import TopicName

from gateway.analytics import kinds
from gateway.analytics.findings import read_findings_json
from gateway.cli import main
from gateway.devstack.gateway_proc import GatewayProcess, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, sasl_listener
from .rawkafka import RawConnection, known_everywhere

pytestmark = [pytest.mark.integration, pytest.mark.jvm]
POLICIES = Path(__file__).resolve().parents[2] / "policies"
TENANT = f"f{uuid.uuid4().hex[:6]}"
ATTACKER, SPRAYER = "127.0.0.2", "127.0.0.3"
BLOCK_S = 150  # the temporary block's lifetime
LATENCY_S = 60
TOPIC_AUTHORIZATION_FAILED = 29


class Webhook(BaseHTTPRequestHandler):
    bodies: list[Any] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


class Stack:
    def __init__(self, gateway: GatewayProcess, work: Path, access_topic: str) -> None:
        self.gateway = gateway
        self.work = work
        self.access_topic = access_topic
        self.created: dict[str, Any] = {}
        self.victim = ("", "")
        self.newcomer = ("", "")

    def kgw(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", *args],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip

    def conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = json.loads(
            (self.work / "bundle" / "confluent-kafka.json").read_text()
        )
        return conf


@pytest.fixture(scope="module")
def stack(
    kafka_cluster: KafkaCluster,
    gateway_factory: GatewayFactory,
    tmp_path_factory: pytest.TempPathFactory,
) -> Stack:
    work = tmp_path_factory.mktemp("follow")
    policy_dir = work / "policies"
    policy_dir.mkdir()
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text("# managed by kgw\n")
    access_topic = f"kgw.access.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(access_topic, 3, 3)])[access_topic].result(60)
    asyncio.run(known_everywhere(list(kafka_cluster.brokers.values()), access_topic))
    (work / "access").mkdir()
    gateway = gateway_factory(
        wait_ready=False,
        listeners=[sasl_listener()],
        accesslog={
            "path": str(work / "access" / "access.log"),
            "max_bytes": 8 << 20,
            "topic": {"name": access_topic},
        },
        sasl={
            "mechanisms": ["PLAIN"],
            "credential_store": {"file": str(work / "credentials.json")},
            "failure_limiter": {"max_failures": 1000, "base_delay_s": 0.01, "max_delay_s": 0.02},
        },
        authorization={"policy_dir": str(policy_dir), "reload_interval_s": 0.25},
        audit={"trail": str(work / "audit.jsonl")},
        quotas={"store_file": str(work / "quotas.json"), "plans": {"starter": {"max_topics": 8}}},
    )
    made = Stack(gateway, work, access_topic)
    config = str(gateway.config_path)
    done = made.kgw("tenant", "create", TENANT, "--config", config, "--plan", "starter",
                    "--bundle-dir", str(work / "bundle"), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    made.created = json.loads(done.stdout)
    for name in ("victim", "newcomer"):
        key = made.kgw("apikey", "create", "--config", config, "--tenant", TENANT,
                       "--principal", f"User:{TENANT}.{name}", "--json")  # fmt: skip
        assert key.returncode == 0, key.stderr
        made_key = json.loads(key.stdout)
        setattr(made, name, (made_key["key_id"], made_key["secret"]))
    return made


@pytest.fixture(scope="module")
def webhook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("prometheus-alertmanager is not installed (scripts/setup.sh installs it)")
    work = tmp_path_factory.mktemp("alertmanager")
    (work / "am.yml").write_text("route: {receiver: none}\nreceivers: [{name: none}]\n")
    port, _ = pick_ports()
    proc = subprocess.Popen(
        [binary, f"--config.file={work / 'am.yml'}", f"--storage.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=subprocess.DEVNULL, stderr=(work / "am.log").open("w"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"alertmanager did not start: {(work / 'am.log').read_text()[-2000:]}")
        time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(30)


class Follower:
    """``kgw analyze --follow`` as a child process."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway", "analyze", "--follow", "--follow-config",
                 str(self.config)], stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(120)
        self.proc = None
        return code

    def batches(self) -> int:
        return self.log.read_text().count("[follow] batch ") if self.log.exists() else 0

    def alive(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-4000:]


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait(what: str, check: Any, follower: Follower, seconds: float = 300) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        follower.alive()
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}: {follower.log.read_text()[-3000:]}")


async def _open_from(address: str, local: str) -> RawConnection:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), local_addr=(local, 0))
    return RawConnection(reader, writer)


async def _login(address: str, local: str, key_id: str, secret: str) -> tuple[int, RawConnection]:
    connection = await _open_from(address, local)
    await connection.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    answer = await connection.request(
        SaslAuthenticateRequest(auth_bytes=f"\0{key_id}\0{secret}".encode()),
        SaslAuthenticateResponse,
    )
    return int(answer.error_code), connection


async def _failed_logins(address: str, local: str, key_ids: list[str], each: int) -> None:
    for key_id in key_ids:
        for n in range(each):
            code, connection = await _login(address, local, key_id, f"wrong-{uuid.uuid4().hex}{n}")
            connection.close()
            assert code != 0


async def _topic_error(address: str, local: str, key: tuple[str, str], topic: str) -> int:
    code, connection = await _login(address, local, *key)
    assert code == 0
    try:
        answer = await connection.request(
            MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(topic), topic_id=None),),
                            allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False),
            MetadataResponse,
        )  # fmt: skip
    finally:
        connection.close()
    return int(answer.topics[0].error_code)


def _produce(conf: dict[str, Any], topic: str, count: int) -> None:
    producer = Producer({**conf, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(60) == 0


@pytest.mark.timeout(2400)  # Spark starts twice; slow on a shared machine
def test_follow_alerts_blocks_and_survives_a_restart(
    stack: Stack, kafka_cluster: KafkaCluster, webhook: str, alertmanager: str
) -> None:
    work = stack.work
    orders = f"{TENANT}.orders"
    admin = AdminClient(stack.conf())
    admin.create_topics([NewTopic(orders, 3, 3)])[orders].result(60)
    _produce(stack.conf(), orders, 20)  # the healthy tenant, before anything happens

    (work / "response.yaml").write_text(
        "rules:\n"
        f"  - {{detector: {kinds.AUTH_BURST_ADDRESS}, min_severity: medium,"
        f" action: block_address, expire_s: {BLOCK_S}}}\n"
        "never_block: ['127.0.0.1']\n"
    )
    config = work / "follow.yaml"
    config.write_text(json.dumps({
        "source": {"bootstrap_servers": kafka_cluster.bootstrap_servers,
                   "topic": stack.access_topic},
        "checkpoint_dir": str(work / "checkpoint"),
        "out": str(work / "out"),
        "trigger_s": 5,
        "alerts": {"webhook_url": webhook, "alertmanager_url": alertmanager},
        "response": {"policy_file": str(work / "response.yaml"),
                     "gateway_config": str(stack.gateway.config_path), "dry_run": False},
    }))  # fmt: skip
    findings_path, responses = work / "out" / "findings.jsonl", work / "out" / "response.jsonl"
    follower = Follower(config, work / "follow.log")
    follower.start()
    try:
        _wait("the first micro-batch", lambda: follower.batches() >= 1, follower, 900)

        # a brute force from 127.0.0.2 against the victim's key
        asyncio.run(_failed_logins(stack.gateway.bootstrap, ATTACKER, [stack.victim[0]], 15))
        attack_ended = time.monotonic()

        def burst() -> list[dict[str, Any]]:
            return [f for f in _lines(findings_path) if f["detector"] == kinds.AUTH_BURST_ADDRESS
                    and f["entity"] == ATTACKER]  # fmt: skip

        found = _wait("the brute force's finding", burst, follower)
        latency = time.monotonic() - attack_ended
        print(f"brute force found {latency:.1f}s after its last failed login; lag_s "
              f"{found[0]['lag_s']}")  # fmt: skip
        assert latency <= LATENCY_S and found[0]["lag_s"] <= LATENCY_S
        assert found[0]["evidence"]["failures"] >= 15
        principal = [f for f in _lines(findings_path)
                     if f["detector"] == kinds.AUTH_BURST_PRINCIPAL]  # fmt: skip
        assert [f["principal"] for f in principal] == [stack.victim[0]]

        # the response: a DENY rule for the address, through the audited admin path
        blocked = _wait(
            "the block",
            lambda: [r for r in _lines(responses) if r["action"] == "block_address"],
            follower,
        )
        assert blocked[0]["ok"] and blocked[0]["target"] == ATTACKER, blocked
        policy = (work / "policies" / "policy.csv").read_text()
        assert f"{ATTACKER}" in policy and "deny" in policy
        trail = (work / "audit.jsonl").read_text()
        assert ATTACKER in trail and "kgw-analyze" in trail
        time.sleep(1.0)  # the gateway reloads policies every 0.25 s
        healthy = (stack.created["api_key"], stack.created["secret"])
        assert asyncio.run(_topic_error(stack.gateway.bootstrap, ATTACKER, healthy, orders)) == (
            TOPIC_AUTHORIZATION_FAILED
        )
        assert asyncio.run(_topic_error(stack.gateway.bootstrap, "127.0.0.1", healthy, orders)) == 0
        _produce(stack.conf(), orders, 20)  # the tenant keeps working

        # alerts: the webhook's JSON and Alertmanager's API
        hooked = [f for body in Webhook.bodies for f in body["findings"]]
        assert any(f["id"] == found[0]["id"] for f in hooked), hooked
        with urllib.request.urlopen(f"{alertmanager}/api/v2/alerts", timeout=10) as answer:
            active = json.loads(answer.read())
        names = {(a["labels"]["alertname"], a["labels"].get("client_host")) for a in active}
        assert (f"kgw_{kinds.AUTH_BURST_ADDRESS}", ATTACKER) in names, active
        assert any(a["labels"]["finding_id"] == found[0]["id"] for a in active)

        # stopped; a spray while it is down; restarted from the checkpoint
        assert follower.stop() == 0
        before = _lines(findings_path)
        others = [f"{TENANT}-k{n}" for n in range(10)]
        asyncio.run(_failed_logins(stack.gateway.bootstrap, SPRAYER, others, 1))
        follower.start()

        def spray() -> list[dict[str, Any]]:
            return [f for f in _lines(findings_path)
                    if f["detector"] == kinds.SPRAYING and f["entity"] == SPRAYER]  # fmt: skip

        _wait("the spray (made while the follower was down)", spray, follower, 900)
        batches = follower.batches()
        _produce(stack.conf(), orders, 10)  # new records: another batch re-runs detection
        _wait("another micro-batch", lambda: follower.batches() > batches, follower)
        after = _lines(findings_path)
        ids = [f["id"] for f in after]
        assert len(ids) == len(set(ids)), "a finding was emitted twice"
        assert after[: len(before)] == before

        # the temporary block expires and is lifted
        lifted = _wait(
            "the block to expire",
            lambda: [r for r in _lines(responses) if r["action"] == "unblock_address"],
            follower, BLOCK_S + 120,
        )  # fmt: skip
        assert lifted[0]["ok"], lifted
        time.sleep(1.0)
        assert ATTACKER not in (work / "policies" / "policy.csv").read_text()
        assert asyncio.run(_topic_error(stack.gateway.bootstrap, ATTACKER, healthy, orders)) == 0
    finally:
        if follower.proc is not None:
            follower.stop()

    # batch analysis of the access-log file the same gateway wrote: brute force, spray,
    # and a new key probing topics outside its tenant
    consumer = Consumer({**_conf_for(stack, stack.newcomer), "group.id": f"{TENANT}.probe",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    foreign = [f"other{n}.secrets" for n in range(12)]
    consumer.subscribe(foreign)
    for _ in range(10):
        consumer.poll(0.5)
    consumer.close()
    for topic in foreign:
        assert (
            asyncio.run(_topic_error(stack.gateway.bootstrap, "127.0.0.1", stack.newcomer, topic))
            == TOPIC_AUTHORIZATION_FAILED
        )
    time.sleep(2.0)  # the access-log writer drains off the data path
    out = work / "analysis"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["analyze", "--logs", str(work / "access"), "--out", str(out), "--no-report"])
    assert code == 0, stderr.getvalue()
    findings = read_findings_json(out / "findings.json")
    by = {(f.detector, f.entity) for f in findings}
    print(sorted(by))
    assert (kinds.AUTH_BURST_ADDRESS, ATTACKER) in by
    assert (kinds.AUTH_BURST_PRINCIPAL, stack.victim[0]) in by
    assert (kinds.SPRAYING, SPRAYER) in by
    probing = {kinds.PROBING, kinds.NEW_PRINCIPAL_PROBING, kinds.DENIED_SPIKE}
    probed = [f for f in findings if f.detector in probing]
    names = {stack.newcomer[0], f"User:{TENANT}.newcomer"}
    assert any(f.principal in names for f in probed), sorted(by)


def _conf_for(stack: Stack, key: tuple[str, str]) -> dict[str, Any]:
    conf = stack.conf()
    return {**conf, "sasl.username": key[0], "sasl.password": key[1]}
