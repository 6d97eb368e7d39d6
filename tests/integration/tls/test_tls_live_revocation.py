"""Issue 16 (part 4): revoking a client certificate closes its *established*
connections, not only new handshakes, while another mTLS client keeps producing and
consuming through the same listener (decision 0029).

Two real confluent-kafka clients with their own certificates from tenant A's CA, plus
a raw TLS socket holding an idle, established Kafka connection with the revoked
certificate; ``kgw certs revoke`` is run as a security admin would.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.tls.ca import parse_subject

from .conftest import (
    ConsumerThread,
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

WATCH_S = 0.5  # tls_section's watch_interval_s: the interval that applies
CLOSE_REASON = "client certificate revoked"


def api_versions_frame(correlation_id: int) -> bytes:
    """ApiVersions v0 (no body), client id "raw"."""
    header = struct.pack(">hhih", 18, 0, correlation_id, 3) + b"raw"
    return struct.pack(">i", len(header)) + header


def raw_client(gw: GatewayProcess, context: ssl.SSLContext) -> ssl.SSLSocket:
    """An mTLS connection that has made one request and then stays idle."""
    raw = socket.create_connection(("127.0.0.1", int(gw.listener["bootstrap_port"])), timeout=10)
    tls = context.wrap_socket(raw, server_hostname="localhost")
    tls.sendall(api_versions_frame(1))
    size = struct.unpack(">i", tls.recv(4))[0]
    assert size > 0
    while size:
        size -= len(tls.recv(size))
    return tls


def ts(record: dict[str, Any]) -> float:
    stamp = datetime.datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=datetime.UTC).timestamp()


def test_revoked_certificate_loses_its_established_connections(
    start_tls_gateway: StartTls, pki: Pki, tmp_path: Path, threads: list[Any]
) -> None:
    suffix = str(time.monotonic_ns())
    keeper, leaker = f"keeper-{suffix}", f"leaker-{suffix}"
    for name in (keeper, leaker):
        pki.tenant_a.issue(name, "client", parse_subject(f"CN={name},OU=payments,O=Acme"))
    gw = start_tls_gateway(
        tls_listener(tls_section(pki)), pki.context(keeper), accesslog=access_log(tmp_path)
    )
    bootstrap = f"localhost:{gw.listener['bootstrap_port']}"
    keeper_conf = {"bootstrap.servers": bootstrap, **pki.confluent(keeper)}
    leaker_conf = {"bootstrap.servers": bootstrap, **pki.confluent(leaker)}
    topic = f"live-revocation-{suffix}"
    admin = AdminClient(keeper_conf)  # kept: a dropped handle fails its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)

    keep = ProducerThread(keeper_conf, topic).start()
    consumer = ConsumerThread(keeper_conf, topic).start()
    leak = ProducerThread({**leaker_conf, "message.timeout.ms": "60000"}, topic).start()
    threads.extend([keep, consumer, leak])
    keep.wait_more(100)
    leak.wait_more(100)
    consumer.wait_count(150)
    idle = raw_client(gw, pki.context(leaker))
    idle_keeper = raw_client(gw, pki.context(keeper))

    established = {
        r["conn"] for r in events(gw, "tls_established") if f"CN={leaker}," in r["subject"]
    }
    assert len(established) >= 2, "the leaker's producer and the raw socket are connected"
    revoked_before = len(events(gw, "certificate_revoked"))
    reloads = len(events(gw, "tls_reloaded"))
    started = time.time()
    out = kgw_certs(pki.root, "revoke", "tenant-a", leaker, "--reason", "key_compromise")
    assert f"revoked '{leaker}'" in out
    wait_for_event(gw, "tls_reloaded", reloads)

    # the idle established socket is closed by the gateway within the interval
    idle.settimeout(WATCH_S + 5)
    assert idle.recv(1) == b"", "the gateway closed the revoked certificate's connection"
    closed_within = time.time() - started
    assert closed_within < WATCH_S + 5, closed_within
    first = wait_for_event(gw, "certificate_revoked", revoked_before)
    assert ts(first) - started < WATCH_S + 3

    revoked = events(gw, "certificate_revoked")[revoked_before:]
    assert {r["conn"] for r in revoked} <= established
    for record in revoked:
        assert record["level"] == "WARNING" and record["listener"] == "mtls"
        assert record["subject"] == f"CN={leaker},OU=payments,O=Acme"
        assert record["serial"] == pki.tenant_a.find(leaker).serial
        assert record["reason"] == "key_compromise" and record["peer"].startswith("127.0.0.1:")
        assert "PRIVATE KEY" not in str(record)
    closes = {
        r["conn"]: r for r in events(gw, "connection_closed") if r.get("reason") == CLOSE_REASON
    }
    assert {r["conn"] for r in revoked} <= set(closes)

    # the producer with the revoked certificate delivers nothing more: reconnects are refused
    wait_for_event(gw, "tls_handshake_failed", where=lambda r: r["reason"] == "cert_revoked")
    time.sleep(1)
    stalled = leak.delivered
    time.sleep(3)
    assert leak.delivered == stalled

    # the other client kept producing and consuming throughout, on its connections
    keep.wait_more(200)
    consumer.wait_count(len(consumer.values) + 150)
    assert not keep.errors, keep.errors[:3]
    idle_keeper.sendall(api_versions_frame(2))
    assert len(idle_keeper.recv(4)) == 4, "the keeper's idle connection is still open"
    idle_keeper.close()
    assert not any(f"CN={keeper}," in r["subject"] for r in events(gw, "certificate_revoked"))

    # each revoked connection's access-log close record carries the reason
    revoked_conns = {r["conn"] for r in revoked}

    def all_closed(records: list[dict[str, Any]]) -> bool:
        done = {r["conn"] for r in records if r.get("event") == "close"}
        return revoked_conns <= done

    records = access_records(tmp_path, all_closed)
    for record in records:
        if record.get("event") == "close" and record["conn"] in revoked_conns:
            assert record["reason"] == CLOSE_REASON
            assert record["principal"] == f"User:payments.{leaker}"
