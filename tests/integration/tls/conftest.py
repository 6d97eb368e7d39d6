"""Fixtures for the TLS integration tests: a PKI made at test time with ``kgw certs``'
own code, TLS gateways in front of the real cluster, and a TLS-aware readiness wait.

Nothing here skips: a missing Java, Kafka or port makes the tests fail.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from gateway.devstack.gateway_proc import GatewayProcess, pick_ports
from gateway.tls.ca import CertificateAuthority, parse_subject, utcnow
from gateway.upstream.client import BROKER_ERRORS, BrokerClient

from ...conftest import GatewayFactory, gateway_log_events

DAY = datetime.timedelta(days=1)
REPO = Path(__file__).resolve().parents[3]
PRINCIPAL_RULES = ["RULE:^CN=([^,]+),OU=([^,]+),O=Acme$/$2.$1/L", "DEFAULT"]


def kgw_certs(root: Path, *args: str) -> str:
    """Run ``kgw certs`` as a separate process, as a security admin would."""
    proc = subprocess.run(
        [sys.executable, "-m", "gateway", "certs", "--dir", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PRIVATE KEY" not in proc.stdout + proc.stderr
    return proc.stdout


@dataclass
class Pki:
    root: Path
    gateway: CertificateAuthority  # the gateway's server certificates
    tenant_a: CertificateAuthority
    tenant_b: CertificateAuthority
    tenant_b2: CertificateAuthority  # tenant B's next CA (CA rotation)
    rogue: CertificateAuthority  # trusted by nobody

    def cert(self, ca: CertificateAuthority, name: str) -> Path:
        return ca.dir / "issued" / f"{name}.pem"

    def key(self, ca: CertificateAuthority, name: str) -> Path:
        return ca.dir / "issued" / f"{name}.key"

    def confluent(self, name: str | None, ca: CertificateAuthority | None = None) -> dict[str, str]:
        """librdkafka settings for an mTLS client with ``name``'s certificate."""
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(self.gateway.cert_path)}
        if name is not None:
            ca = ca or self.tenant_a
            conf["ssl.certificate.location"] = str(self.cert(ca, name))
            conf["ssl.key.location"] = str(self.key(ca, name))
        return conf

    def context(self, name: str | None, ca: CertificateAuthority | None = None) -> ssl.SSLContext:
        """A Python ssl client context trusting the gateway, with ``name``'s certificate."""
        context = ssl.create_default_context(cafile=str(self.gateway.cert_path))
        if name is not None:
            ca = ca or self.tenant_a
            context.load_cert_chain(self.cert(ca, name), self.key(ca, name))
        return context


def _client(ca: CertificateAuthority, name: str, ou: str = "payments", **kw: Any) -> None:
    ca.issue(name, "client", parse_subject(f"CN={name},OU={ou},O=Acme"), **kw)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    kgw_certs(root, "init-ca", "gateway", "--subject", "CN=KaaS Gateway CA,O=KaaS")
    gateway = CertificateAuthority(root / "gateway")
    kgw_certs(root, "server", "gateway", "gw", "--san", "localhost", "--san", "127.0.0.1",
              "--san", "kafka.test", "--san", "*.kafka.test")  # fmt: skip
    cas = {
        name: CertificateAuthority.create(root / name, parse_subject(f"CN={name} CA,O=Acme"))
        for name in ("tenant-a", "tenant-b", "tenant-b2", "rogue")
    }
    a = cas["tenant-a"]
    for name in ("confluent-app", "kpy-app", "java-app", "healthy", "victim", "consumer"):
        _client(a, name)
    now = utcnow()
    _client(a, "expired", not_before=now - 10 * DAY, not_after=now - DAY)
    _client(a, "future", not_before=now + DAY, not_after=now + 10 * DAY)
    _client(cas["tenant-b"], "b-app", ou="orders")
    _client(cas["tenant-b2"], "b2-app", ou="orders")
    _client(cas["rogue"], "intruder")
    return Pki(root, gateway, a, cas["tenant-b"], cas["tenant-b2"], cas["rogue"])


def tls_section(pki: Pki, material: Path | None = None, **overrides: Any) -> dict[str, Any]:
    """A listener ``tls`` block: mTLS against tenant A and B (with CRLs).

    With ``material`` the server certificate/key and tenant B's CA and CRL are
    copies in that directory (so a test may replace them); tenant A's CA and CRL
    are the CA directory's own files (so ``kgw certs revoke`` takes effect).
    """
    cert, key = pki.cert(pki.gateway, "gw"), pki.key(pki.gateway, "gw")
    b_ca, b_crl = pki.tenant_b.cert_path, pki.tenant_b.crl_path
    if material is not None:
        material.mkdir(parents=True, exist_ok=True)
        for src, dst in ((cert, "server.pem"), (key, "server.key"),
                         (b_ca, "tenant-b.pem"), (b_crl, "tenant-b.crl")):  # fmt: skip
            shutil.copy(src, material / dst)
        cert, key = material / "server.pem", material / "server.key"
        b_ca, b_crl = material / "tenant-b.pem", material / "tenant-b.crl"
    section: dict[str, Any] = {
        "cert_file": str(cert),
        "key_file": str(key),
        "client_auth": "required",
        "client_cas": [
            {"ca_file": str(pki.tenant_a.cert_path), "crl_file": str(pki.tenant_a.crl_path)},
            {"ca_file": str(b_ca), "crl_file": str(b_crl)},
        ],
        "principal": {"rules": PRINCIPAL_RULES},
        "handshake_timeout_s": 2,
        "watch_interval_s": 0.5,
    }
    section.update(overrides)
    return section


def tls_listener(tls: dict[str, Any], **more: Any) -> dict[str, Any]:
    bootstrap, base = pick_ports()
    listener = {
        "name": "mtls",
        "bind_host": "127.0.0.1",
        "bootstrap_port": bootstrap,
        "broker_port_base": base,
        "advertised_host": "localhost",
        "max_node_id": 16,
        "tls": tls,
    }
    listener.update(more)
    return listener


def wait_tls_ready(
    gateway: GatewayProcess, context: ssl.SSLContext, brokers: int, timeout: float = 60
) -> None:
    """Until metadata fetched over TLS through the gateway lists ``brokers`` brokers."""
    address = ("127.0.0.1", int(gateway.listener["bootstrap_port"]))
    client = BrokerClient([address], tls=context, timeout_s=5.0)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if gateway.proc is not None and gateway.proc.poll() is not None:
            raise RuntimeError(f"gateway exited:\n{gateway.log_tail()}")
        try:
            seen = asyncio.run(client.brokers(address))
        except BROKER_ERRORS as exc:
            last = str(exc) or type(exc).__name__
        else:
            if len(seen) >= brokers:
                return
            last = f"brokers seen: {seen}"
        time.sleep(0.3)
    raise RuntimeError(f"TLS gateway not ready ({last}):\n{gateway.log_tail()}")


StartTls = Callable[..., GatewayProcess]


@pytest.fixture(scope="session")
def start_tls_gateway(gateway_factory: GatewayFactory, pki: Pki, kafka_cluster: Any) -> StartTls:
    """``start_tls_gateway(listener)``: a gateway on the shared cluster, ready over TLS."""

    def start(
        listener: dict[str, Any], probe: ssl.SSLContext | None = None, **overrides: Any
    ) -> GatewayProcess:
        gateway = gateway_factory(wait_ready=False, listeners=[listener], **overrides)
        wait_tls_ready(gateway, probe or pki.context("healthy"), len(kafka_cluster.pids))
        return gateway

    return start


def events(gateway: GatewayProcess, event: str) -> list[dict[str, Any]]:
    return gateway_log_events(gateway, event)


def access_log(path: Path) -> dict[str, Any]:
    """An ``accesslog`` configuration section writing under ``path``."""
    return {"path": str(path / "access.log"), "max_bytes": 1 << 22, "max_files": 3}


def access_records(
    path: Path, wait_for: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The access-log records under ``path`` once ``wait_for(records)`` (the writer is async)."""
    deadline = time.monotonic() + 15
    while True:
        records = []
        for file in sorted(path.glob("access.log*")):
            for line in file.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
        if wait_for(records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def wait_for_event(
    gateway: GatewayProcess,
    event: str,
    since: int = 0,
    timeout: float = 15,
    where: Callable[[dict[str, Any]], bool] = lambda _r: True,
) -> dict[str, Any]:
    """The first ``event`` record after the first ``since`` ones that satisfies ``where``."""
    deadline = time.monotonic() + timeout
    while True:
        for record in events(gateway, event)[since:]:
            if where(record):
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no {event} record within {timeout}s:\n{gateway.log_tail()}")
        time.sleep(0.1)


class ProducerThread:
    """Produces continuously (acks=all) in a thread and counts deliveries."""

    def __init__(self, conf: dict[str, str], topic: str, pace_s: float = 0.005) -> None:
        self.producer = Producer({**conf, "acks": "all", "linger.ms": 5})
        self.topic = topic
        self.pace_s = pace_s
        self.sent = 0
        self.delivered = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: object, _msg: object) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(
                self.topic, value=f"v{self.sent}".encode(), on_delivery=self._report
            )
            self.sent += 1
            self.producer.poll(self.pace_s)
        self.producer.flush(15)
        del self.producer  # destroyed now, not retrying connections until the session ends

    def start(self) -> ProducerThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait_more(self, count: int, timeout: float = 20) -> None:
        """Until ``count`` more records than now were delivered."""
        target = self.delivered + count
        deadline = time.monotonic() + timeout
        while self.delivered < target:
            assert time.monotonic() < deadline, f"only {self.delivered}/{target} delivered"
            assert not self.errors, self.errors[:3]
            time.sleep(0.05)


class ConsumerThread:
    """Consumes a topic in a thread; counts records, errors and broker (re)connects."""

    def __init__(self, conf: dict[str, str], topic: str) -> None:
        self.consumer = Consumer(
            {
                **conf,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "statistics.interval.ms": 200,
                "stats_cb": self._stats,
                "error_cb": self._error,
            }
        )
        self.consumer.subscribe([topic])
        self.values: set[bytes] = set()
        self.errors: list[str] = []
        self.connects: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _stats(self, text: str) -> None:
        stats = json.loads(text)
        self.connects = {
            name: int(b.get("connects", 0))
            for name, b in stats.get("brokers", {}).items()
            if int(b.get("nodeid", -1)) >= 0
        }

    def _error(self, err: object) -> None:
        self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            value = msg.value()
            if value is not None:
                self.values.add(value)
        self.consumer.close()

    def start(self) -> ConsumerThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait_count(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.values) < count:
            assert time.monotonic() < deadline, f"consumed {len(self.values)} of {count}"
            time.sleep(0.05)


@pytest.fixture
def threads() -> Iterator[list[ProducerThread | ConsumerThread]]:
    """Client threads a test starts; all stopped at the end."""
    started: list[ProducerThread | ConsumerThread] = []
    yield started
    for thread in started:
        thread.stop()
