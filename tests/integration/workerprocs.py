"""Looking at a ``kgw serve --workers N`` process group from outside, as an operator
would: its workers (children of the supervisor), each worker's private metrics
endpoint, and which worker holds the server side of a given client connection
(``/proc/<pid>/fd`` and ``/proc/net/tcp``)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..redis_server import free_port

START_TIMEOUT_S = 240  # two fresh interpreters on a host shared by many test runs


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _argv(pid: int) -> list[str]:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"))[:-1]
    except OSError:
        return []


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def start_gateway(
    cluster: KafkaCluster, workdir: Path, wait_brokers: bool = True, **overrides: Any
) -> tuple[GatewayProcess, int]:
    """``kgw serve`` with ``server.workers: 2`` and a metrics port, both workers up."""
    bootstrap, base = pick_ports()
    port = free_port()
    sections: dict[str, Any] = {"server": {"workers": 2}, "metrics": {"port": port}}
    config = dev_config(cluster.bootstrap_servers, bootstrap, base, **(sections | overrides))
    gateway = GatewayProcess(workdir, config)
    try:
        gateway.start(len(cluster.pids) if wait_brokers else None, timeout=START_TIMEOUT_S)
        assert gateway.pid is not None
        if config["server"]["workers"] > 1:
            wait_workers(gateway.pid, config["server"]["workers"], START_TIMEOUT_S)
    except BaseException:
        gateway.stop()
        raise
    return gateway, port


def workers(supervisor: int) -> dict[int, int]:
    """slot -> pid of the supervisor's live workers."""
    found = {}
    for pid in _children(supervisor):
        slot = _option(_argv(pid), "--worker-slot")
        if slot is not None:
            found[int(slot)] = pid
    return found


def metrics_port(pid: int) -> int | None:
    """A worker's private metrics port, from the status file it gave its supervisor."""
    argv = _argv(pid)
    directory, slot = _option(argv, "--worker-dir"), _option(argv, "--worker-slot")
    if directory is None or slot is None:
        return None
    try:
        data = json.loads((Path(directory) / f"worker-{slot}.json").read_text())
    except (OSError, ValueError):
        return None
    return int(data["metrics_port"]) if data.get("pid") == pid else None


def wait_workers(supervisor: int, count: int, timeout: float = 60) -> dict[int, int]:
    """Until ``count`` workers have reported (status file written): slot -> pid."""
    deadline = time.monotonic() + timeout
    seen: dict[int, int] = {}
    while time.monotonic() < deadline:
        seen = workers(supervisor)
        if len(seen) == count and all(metrics_port(pid) for pid in seen.values()):
            return seen
        time.sleep(0.2)
    raise AssertionError(f"{count} workers never reported; seen {seen}")


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, prefix: str) -> float:
    """The sum of every sample whose line starts with ``prefix``."""
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


def _socket_inodes(pid: int) -> set[int]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                found.add(int(link[8:-1]))
    except OSError:
        pass
    return found


def owner(client_port: int, pids: list[int]) -> int | None:
    """The worker holding the server side of the loopback connection from ``client_port``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == client_port and fields[3] == "01":  # ESTABLISHED
            inode = int(fields[9])
            break
    if inode is None:
        return None
    return next((pid for pid in pids if inode in _socket_inodes(pid)), None)
