"""Rotation without downtime: the server certificate, the CA bundles and the CRL are
replaced on disk while clients stream; new connections get the new material, established
ones are not interrupted, and bad replacements are refused with the old material kept."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from gateway.devstack.gateway_proc import GatewayProcess

from .conftest import (
    ConsumerThread,
    Pki,
    ProducerThread,
    StartTls,
    events,
    kgw_certs,
    tls_listener,
    tls_section,
    wait_for_event,
)

pytestmark = pytest.mark.integration


def bootstrap(gw: GatewayProcess) -> str:
    return f"localhost:{gw.listener['bootstrap_port']}"


def presented(gw: GatewayProcess, pki: Pki) -> str:
    """SHA-256 of the certificate a brand-new connection is shown."""
    context = pki.context("healthy")
    port = int(gw.listener["bootstrap_port"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        context.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def fingerprint(path: Path) -> str:
    cert = x509.load_pem_x509_certificates(path.read_bytes())[0]
    return hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()


def replace(src: Path, dst: Path) -> None:
    """Replace a file atomically, as a deployment tool would."""
    tmp = dst.with_name(f".{dst.name}.new")
    shutil.copy(src, tmp)
    os.replace(tmp, dst)


def new_server_cert(pki: Pki, name: str) -> tuple[Path, Path]:
    kgw_certs(pki.root, "server", "gateway", name, "--san", "localhost", "--san", "127.0.0.1")
    return pki.cert(pki.gateway, name), pki.key(pki.gateway, name)


def install(material: Path, cert: Path, key: Path) -> None:
    replace(key, material / "server.key")
    replace(cert, material / "server.pem")


def reconnects(consumer: ConsumerThread, before: dict[str, int]) -> dict[str, int]:
    """Brokers the consumer connected to again since ``before`` (name -> extra connects)."""
    now = consumer.connects
    return {name: now[name] - n for name, n in before.items() if now.get(name, n) != n}


@pytest.fixture(scope="module")
def rot_material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rot-material")


@pytest.fixture(scope="module")
def rot(start_tls_gateway: StartTls, pki: Pki, rot_material: Path) -> GatewayProcess:
    return start_tls_gateway(tls_listener(tls_section(pki, rot_material)))


def test_server_certificate_rotates_under_a_streaming_consumer(
    rot: GatewayProcess, rot_material: Path, pki: Pki, topic: str,
    threads: list[ProducerThread | ConsumerThread],
) -> None:  # fmt: skip
    conf = {"bootstrap.servers": bootstrap(rot), **pki.confluent("healthy")}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = ProducerThread(conf, topic).start()
    threads.append(producer)
    consumer = ConsumerThread(
        {"bootstrap.servers": bootstrap(rot), **pki.confluent("consumer")}, topic
    ).start()
    threads.append(consumer)
    consumer.wait_count(200)
    time.sleep(0.5)  # a statistics report with the established connections
    connects = dict(consumer.connects)
    assert connects and all(n >= 1 for n in connects.values())
    old = presented(rot, pki)
    assert old == fingerprint(rot_material / "server.pem")

    cert, key = new_server_cert(pki, "gw-next")
    reloads = len(events(rot, "tls_reloaded"))
    install(rot_material, cert, key)
    wait_for_event(
        rot, "tls_reloaded", reloads, where=lambda r: r["fingerprint"] == fingerprint(cert)
    )
    assert presented(rot, pki) == fingerprint(cert) != old

    # the consumer went on, on the connections it had
    count = len(consumer.values)
    consumer.wait_count(count + 200)
    time.sleep(0.5)
    assert reconnects(consumer, connects) == {}, "the consumer had to reconnect"
    assert not consumer.errors, consumer.errors[:3]

    # bad replacements: refused, and the new certificate stays in use
    good_cert, good_key = rot_material / "server.pem", rot_material / "server.key"
    saved = {p: p.read_bytes() for p in (good_cert, good_key)}
    bad_cases = [
        ("key not matching", [(pki.key(pki.tenant_a, "healthy"), good_key)], "does not match"),
        ("expired", [(pki.key(pki.tenant_a, "expired"), good_key),
                     (pki.cert(pki.tenant_a, "expired"), good_cert)], "expired on"),
        ("unreadable", [(pki.root / "gateway" / "index.json", good_cert)], "no PEM certificate"),
    ]  # fmt: skip
    for case, files, message in bad_cases:
        rejected = len(events(rot, "tls_reload_rejected"))
        for src, dst in files:
            replace(src, dst)
        record = wait_for_event(
            rot, "tls_reload_rejected", rejected, where=lambda r, m=message: m in r["reason"]
        )
        assert record["level"] == "ERROR", case
        assert presented(rot, pki) == fingerprint(cert), case
        for path, data in saved.items():
            path.write_bytes(data)
        wait_for_event(rot, "tls_reloaded", reloads + 1)

    producer.stop()
    sent = {f"v{i}".encode() for i in range(producer.sent)}
    assert producer.delivered == producer.sent and not producer.errors
    consumer.wait_count(len(sent))
    assert consumer.values == sent
    assert reconnects(consumer, connects) == {} and not consumer.errors


def test_sighup_reloads_and_keeps_the_old_material_on_error(
    start_tls_gateway: StartTls, pki: Pki, tmp_path: Path
) -> None:
    """With file watching off, only SIGHUP reloads."""
    material = tmp_path / "material"
    gw = start_tls_gateway(tls_listener(tls_section(pki, material, watch_interval_s=0)))
    assert gw.pid is not None
    old = presented(gw, pki)
    cert, key = new_server_cert(pki, "gw-hup")
    install(material, cert, key)
    time.sleep(1.5)
    assert presented(gw, pki) == old, "reloaded without SIGHUP"
    assert not events(gw, "tls_reloaded")

    os.kill(gw.pid, signal.SIGHUP)
    record = wait_for_event(gw, "tls_reloaded")
    assert "SIGHUP" in record["msg"] and record["fingerprint"] == fingerprint(cert)
    assert presented(gw, pki) == fingerprint(cert)

    (material / "server.pem").write_text("garbage\n")
    os.kill(gw.pid, signal.SIGHUP)
    record = wait_for_event(gw, "tls_reload_rejected")
    assert "no PEM certificate" in record["reason"]
    assert presented(gw, pki) == fingerprint(cert)
    assert gw.proc is not None and gw.proc.poll() is None


def test_tenant_ca_bundle_rotation(rot: GatewayProcess, rot_material: Path, pki: Pki) -> None:
    """Tenant B moves to a new CA: its bundle and CRL are replaced on disk."""

    def works(name: str, ca_attr: str) -> bool:
        conf = {"bootstrap.servers": bootstrap(rot), "log_level": 0,
                **pki.confluent(name, getattr(pki, ca_attr))}  # fmt: skip
        try:
            return bool(AdminClient(conf).list_topics(timeout=4).brokers)
        except KafkaException:
            return False

    assert works("b-app", "tenant_b") and not works("b2-app", "tenant_b2")
    reloads = len(events(rot, "tls_reloaded"))
    replace(pki.tenant_b2.cert_path, rot_material / "tenant-b.pem")
    replace(pki.tenant_b2.crl_path, rot_material / "tenant-b.crl")
    wait_for_event(rot, "tls_reloaded", reloads)
    time.sleep(1)  # a half-done replacement (CA without its CRL) may have been seen first
    assert works("b2-app", "tenant_b2") and not works("b-app", "tenant_b")
    reasons = {r["reason"] for r in events(rot, "tls_handshake_failed")}
    assert "unknown_ca" in reasons
