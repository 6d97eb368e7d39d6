"""Each refusal of issue 3 (1) and (3) with a real TLS client, one structured log line
naming the reason, while a healthy mTLS client keeps producing through the gateway.

Clients: confluent-kafka (librdkafka's OpenSSL) for every certificate case and for
plaintext; Python's ``ssl`` (OpenSSL) for an old protocol version, which librdkafka
and Java no longer offer; raw sockets for the slow handshakes.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess

from .conftest import (
    Pki,
    ProducerThread,
    StartTls,
    access_log,
    access_records,
    events,
    kgw_certs,
    tls_listener,
    tls_section,
    wait_for_event,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def access_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("access")


@pytest.fixture(scope="module")
def mtls(start_tls_gateway: StartTls, pki: Pki, access_dir: Path) -> GatewayProcess:
    return start_tls_gateway(tls_listener(tls_section(pki)), accesslog=access_log(access_dir))


def bootstrap(gw: GatewayProcess) -> str:
    return f"localhost:{gw.listener['bootstrap_port']}"


@pytest.fixture(scope="module")
def healthy(mtls: GatewayProcess, pki: Pki) -> Iterator[ProducerThread]:
    conf = {"bootstrap.servers": bootstrap(mtls), **pki.confluent("healthy")}
    topic = f"healthy-{time.monotonic_ns()}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = ProducerThread(conf, topic).start()
    producer.wait_more(50)
    yield producer
    producer.stop()
    assert not producer.errors, producer.errors[:3]


def refused_by_confluent(gw: GatewayProcess, conf: dict[str, str]) -> None:
    """A librdkafka admin client gets nowhere within a few seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap(gw), "log_level": 0, **conf})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def assert_refusal(gw: GatewayProcess, since: int, reason: str, healthy: ProducerThread) -> None:
    record = wait_for_event(
        gw, "tls_handshake_failed", since, where=lambda r: r["reason"] == reason
    )
    assert record["level"] == "WARNING" and record["listener"] == "mtls"
    assert record["conn"] and record["peer"].startswith("127.0.0.1:")
    others = {r["reason"] for r in events(gw, "tls_handshake_failed")[since:]}
    assert others <= {reason, "peer_closed"}, others
    healthy.wait_more(50)


CERT_CASES: dict[str, tuple[str, str | None, str]] = {
    # case: (CA attribute, client name, reason)
    "unknown CA": ("rogue", "intruder", "unknown_ca"),
    "expired": ("tenant_a", "expired", "cert_expired"),
    "not yet valid": ("tenant_a", "future", "cert_not_yet_valid"),
    "no certificate": ("tenant_a", None, "no_client_cert"),
}


@pytest.mark.parametrize("case", list(CERT_CASES))
def test_bad_client_certificates(
    case: str, mtls: GatewayProcess, pki: Pki, healthy: ProducerThread
) -> None:
    ca_name, name, reason = CERT_CASES[case]
    since = len(events(mtls, "tls_handshake_failed"))
    refused_by_confluent(mtls, pki.confluent(name, getattr(pki, ca_name)))
    assert_refusal(mtls, since, reason, healthy)


def test_plaintext_client_on_tls_port(
    mtls: GatewayProcess, pki: Pki, healthy: ProducerThread
) -> None:
    since = len(events(mtls, "tls_handshake_failed"))
    refused_by_confluent(mtls, {"security.protocol": "PLAINTEXT"})
    assert_refusal(mtls, since, "not_tls", healthy)
    record = events(mtls, "tls_handshake_failed")[since]
    assert "first byte 0x00" in record["msg"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_old_protocol_version(mtls: GatewayProcess, pki: Pki, healthy: ProducerThread) -> None:
    context = pki.context("healthy")
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    since = len(events(mtls, "tls_handshake_failed"))
    port = int(mtls.listener["bootstrap_port"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        pytest.raises(ssl.SSLError) as info,
    ):
        context.wrap_socket(sock, server_hostname="localhost")
    assert "VERSION" in str(info.value).upper()
    assert_refusal(mtls, since, "protocol_version", healthy)


@pytest.mark.parametrize("sent", [b"", b"\x16\x03\x01\x02\x00\x01"])
def test_slow_handshake_is_dropped(
    sent: bytes, mtls: GatewayProcess, healthy: ProducerThread
) -> None:
    """Nothing, or the first bytes of a ClientHello, then silence: dropped after 2 s."""
    since = len(events(mtls, "tls_handshake_failed"))
    port = int(mtls.listener["bootstrap_port"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(1) == b""
        waited = time.monotonic() - started
    assert 1.5 < waited < 8, waited
    record = wait_for_event(
        mtls, "tls_handshake_failed", since, where=lambda r: r["reason"] == "handshake_timeout"
    )
    assert "within 2s" in record["msg"]
    healthy.wait_more(50)


def test_revoked_certificate_is_refused_without_restart(
    mtls: GatewayProcess, pki: Pki, healthy: ProducerThread
) -> None:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap(mtls), **pki.confluent("victim")}
    assert AdminClient(conf).list_topics(timeout=20).brokers, "works before revocation"
    reloads = len(events(mtls, "tls_reloaded"))
    since = len(events(mtls, "tls_handshake_failed"))
    out = kgw_certs(pki.root, "revoke", "tenant-a", "victim", "--reason", "key_compromise")
    assert "revoked 'victim'" in out
    wait_for_event(mtls, "tls_reloaded", reloads)  # the CRL file changed: picked up
    refused_by_confluent(mtls, pki.confluent("victim"))
    assert_refusal(mtls, since, "cert_revoked", healthy)
    # the same gateway process served throughout
    assert mtls.proc is not None and mtls.proc.poll() is None
    assert len(events(mtls, "tls_loaded")) == 1


def test_refusals_leave_no_connection_behind(mtls: GatewayProcess) -> None:
    """A refused handshake never reaches the Kafka layer: no upstream connection is made."""
    refused = {r["conn"] for r in events(mtls, "tls_handshake_failed")}
    assert refused
    upstream = {r.get("conn") for r in events(mtls, "upstream_connect_failed")}
    closed = {r.get("conn") for r in events(mtls, "connection_closed")}
    assert not refused & (upstream | closed)
    # keep the plaintext frame helper honest: the first byte of a Kafka frame is 0x00
    assert struct.pack(">i", 100)[0] == 0


def test_refusals_are_in_the_access_log(mtls: GatewayProcess, access_dir: Path) -> None:
    """Each refused handshake is an open / tls failure (with the reason) / close triple."""
    logged = {r["reason"] for r in events(mtls, "tls_handshake_failed")}

    def all_there(records: list[dict[str, Any]]) -> bool:
        failed = {
            r["reason"] for r in records if r.get("event") == "tls" and r["outcome"] == "failure"
        }
        return logged <= failed

    records = access_records(access_dir, all_there)
    failures = [r for r in records if r.get("event") == "tls" and r["outcome"] == "failure"]
    assert logged <= {r["reason"] for r in failures}
    assert {"cert_expired", "cert_revoked", "unknown_ca", "not_tls"} <= logged
    for record in failures:
        assert record["client_host"] == "127.0.0.1" and record["principal"] == "User:ANONYMOUS"
        conn = [r for r in records if r["conn"] == record["conn"]]
        assert [r["event"] for r in conn] == ["open", "tls", "close"]
