"""Ports, processes and readiness probes of the dev and test cluster's nodes
(``KafkaCluster``)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
from pathlib import Path


def free_ports(host: str, count: int) -> list[int]:
    """Free ports below the kernel's ephemeral range, so that between now and the
    broker binding them no outgoing connection or ``bind(0)`` elsewhere takes one."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    candidates = random.sample(range(10000, max(ephemeral_low, 20000)), 200)
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        for port in candidates + [0] * count:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((host, port))
            except OSError:
                continue
            ports.append(sock.getsockname()[1])
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free ports on {host}")


def pid_runs(pid: int, marker: str) -> bool:
    """True if ``pid`` is alive (not a zombie) and its command line contains ``marker``."""
    try:
        return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def send_signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def metadata_ok(
    host: str, port: int, node_id: int, expected: set[int], client_config: dict[str, str]
) -> bool:
    """Ask broker ``node_id`` itself for metadata; True if it lists every ``expected`` id."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 0, **client_config})
    try:
        md = admin.list_topics(timeout=5)
    except KafkaException:
        return False
    return md.orig_broker_id == node_id and expected <= set(md.brokers)
