"""SIGHUP to ``kgw serve --workers 2`` reaches every worker: after the server certificate
is replaced on disk (file watching off, so only the signal can reload it), new
connections get the new certificate from each worker. Each connection's worker is
identified by the process holding its server-side socket (decision 0030)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

from ...conftest import gateway_log_events
from .. import workerprocs as wp
from .conftest import Pki, kgw_certs, tls_listener, tls_section, wait_tls_ready
from .test_tls_rotation import fingerprint, install

pytestmark = pytest.mark.integration
CONNECTIONS = 40


def served(gw: GatewayProcess, pki: Pki, pids: list[int]) -> dict[int, set[str]]:
    """worker pid -> SHA-256 of the certificates it showed to ``CONNECTIONS`` new clients."""
    context = pki.context("healthy")
    port = int(gw.listener["bootstrap_port"])
    seen: dict[int, set[str]] = {}
    for _ in range(CONNECTIONS):
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
            context.wrap_socket(sock, server_hostname="localhost") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
            assert der is not None
            owner = _owner(gw, tls.getsockname()[1], pids)
            assert owner is not None, "no worker holds the connection"
            seen.setdefault(owner, set()).add(hashlib.sha256(der).hexdigest())
    return seen


def _owner(gw: GatewayProcess, client_port: int, pids: list[int]) -> int | None:
    """The worker holding the server side of the connection from ``client_port``: the
    process holding the socket, or else (a busy host's /proc/net/tcp, read while it
    changes, can miss a line) the worker whose ``tls_established`` line names the port."""
    slots = wp.workers(gw.pid) if gw.pid is not None else {}
    for _ in range(100):  # the worker has the socket once it accepted it
        owner = wp.owner(client_port, pids)
        if owner is not None:
            return owner
        for event in gateway_log_events(gw, "tls_established"):
            if event.get("peer") == f"127.0.0.1:{client_port}" and event.get("worker") in slots:
                return slots[event["worker"]]
        time.sleep(0.05)
    return None


@pytest.fixture
def tls_workers(kafka_cluster: KafkaCluster, pki: Pki, tmp_path: Path) -> Iterator[GatewayProcess]:
    """Two workers behind a TLS listener whose files only a SIGHUP reloads."""
    listener = tls_listener(tls_section(pki, tmp_path / "material", watch_interval_s=0))
    gw, _ = wp.start_gateway(kafka_cluster, tmp_path / "gw", False, listeners=[listener])
    try:
        wait_tls_ready(gw, pki.context("healthy"), len(kafka_cluster.pids), wp.START_TIMEOUT_S)
        yield gw
    finally:
        gw.stop()


def test_sighup_reloads_the_certificate_in_every_worker(
    tls_workers: GatewayProcess, pki: Pki, tmp_path: Path
) -> None:
    gw, material = tls_workers, tmp_path / "material"
    assert gw.pid is not None
    pids = list(wp.workers(gw.pid).values())
    old = fingerprint(material / "server.pem")
    before = served(gw, pki, pids)
    assert set(before) == set(pids), f"connections reached only {set(before)} of {pids}"
    assert all(prints == {old} for prints in before.values()), before

    kgw_certs(pki.root, "server", "gateway", "gw-workers", "--san", "localhost",
              "--san", "127.0.0.1")  # fmt: skip
    install(material, pki.cert(pki.gateway, "gw-workers"), pki.key(pki.gateway, "gw-workers"))
    new = fingerprint(material / "server.pem")
    assert new != old
    time.sleep(1.0)
    unchanged = served(gw, pki, pids)  # no watcher: without the signal nothing reloads
    assert all(prints == {old} for prints in unchanged.values()), unchanged

    os.kill(gw.pid, signal.SIGHUP)  # to the supervisor, which forwards it
    deadline = time.monotonic() + 20
    after: dict[int, set[str]] = {}
    while time.monotonic() < deadline:
        after = served(gw, pki, pids)
        if set(after) == set(pids) and all(p == {new} for p in after.values()):
            break
        time.sleep(0.5)
    assert set(after) == set(pids), f"connections reached only {set(after)} of {pids}"
    assert all(prints == {new} for prints in after.values()), after
    assert set(wp.workers(gw.pid).values()) == set(pids)  # reloaded, not restarted
