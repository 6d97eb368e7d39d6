"""Run ``kgw serve`` as a child process on loopback (dev stack and tests)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from ..upstream.client import BROKER_ERRORS, BrokerClient

DEV_MAX_NODE_ID = 16


def _ports_free(host: str, ports: list[int]) -> bool:
    held = []
    try:
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for sock in held:
            sock.close()


def _ephemeral_start() -> int:
    """The first port of the kernel's range for outgoing connections (Linux: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def pick_ports(
    host: str = "127.0.0.1", span: int = DEV_MAX_NODE_ID + 1, avoid: Collection[int] = ()
) -> tuple[int, int]:
    """A free bootstrap port and a free block of ``span`` ports for the brokers, below
    the kernel's range for outgoing connections: a port found free there can be taken
    by any client's connection before the gateway binds it. ``avoid``: ports already
    promised to another listener that is not listening yet."""
    rng = random.Random()
    top = max(_ephemeral_start(), 20000 + 20 * span)
    promised = set(avoid).union(*_PROMISED)
    for _ in range(200):
        base = rng.randrange(20000, top - span)
        bootstrap = base - 1
        ports = [bootstrap, *range(base, base + span)]
        if not set(ports) & promised and _ports_free(host, ports):
            _PROMISED.append(frozenset(ports))
            return bootstrap, base
    raise RuntimeError("no free block of loopback ports for the gateway")


# Blocks handed out lately in this process: two listeners of one gateway pick their
# blocks before either listens (broker ports even later, when a broker is first seen),
# so a block found free may be promised already.
_PROMISED: deque[frozenset[int]] = deque(maxlen=64)


def dev_config(
    bootstrap_servers: str, bootstrap_port: int, broker_port_base: int, **overrides: Any
) -> dict[str, Any]:
    """A gateway configuration for loopback use; ``overrides`` replace top-level sections."""
    config: dict[str, Any] = {
        "upstream": {
            "bootstrap_servers": bootstrap_servers.split(","),
            "metadata_refresh_s": 2.0,
        },
        "listeners": [
            {
                "name": "local",
                "bind_host": "127.0.0.1",
                "bootstrap_port": bootstrap_port,
                "broker_port_base": broker_port_base,
                "advertised_host": "127.0.0.1",
                "max_node_id": DEV_MAX_NODE_ID,
            }
        ],
        "shutdown": {"drain_timeout_s": 10},
        "logging": {"level": "INFO", "format": "json"},
        "server": {"workers": 1},  # one process, as before workers existed (decision 0030)
    }
    config.update(overrides)
    return config


class GatewayProcess:
    """A ``kgw serve`` child with its config and log file in ``workdir``."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = Path(workdir)
        # tests and the dev stack run one process unless they ask for workers (decision 0030)
        config.setdefault("server", {"workers": 1})
        self.config = config
        self.config_path = self.workdir / "gateway.yaml"
        self.log_path = self.workdir / "gateway.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    @property
    def listener(self) -> dict[str, Any]:
        first: dict[str, Any] = self.config["listeners"][0]
        return first

    @property
    def bootstrap(self) -> str:
        return f"{self.listener['advertised_host']}:{self.listener['bootstrap_port']}"

    def public_port(self, node_id: int) -> int:
        return int(self.listener["broker_port_base"]) + node_id

    def start(
        self, expected_brokers: int | None, timeout: float = 60, detach: bool = False
    ) -> None:
        """Start and wait until ready (``expected_brokers=None``: until it listens)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(self.config_path)],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=detach,
        )
        self.pid = self.proc.pid
        log.close()
        if expected_brokers is None:
            self.wait_listening(timeout)
        else:
            self.wait_ready(expected_brokers, timeout)

    def wait_listening(self, timeout: float) -> None:
        address = (self.listener["bind_host"], int(self.listener["bootstrap_port"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                socket.create_connection(address, timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gateway not listening after {timeout}s:\n{self.log_tail()}")

    def wait_ready(self, expected_brokers: int, timeout: float) -> None:
        """Until metadata through the gateway lists the brokers on their public ports."""
        address = (self.listener["advertised_host"], int(self.listener["bootstrap_port"]))
        client = BrokerClient([address], timeout_s=5.0)  # the gateway's plaintext listener
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                brokers = asyncio.run(client.brokers(address))
            except BROKER_ERRORS as exc:
                last = str(exc) or type(exc).__name__
            else:
                ports_ok = all(p == self.public_port(n) for n, (_, p) in brokers.items())
                if len(brokers) >= expected_brokers and ports_ok and self._ports_open(brokers):
                    return
                last = f"brokers seen: {brokers}"
            time.sleep(0.3)
        raise RuntimeError(f"gateway not ready after {timeout}s ({last}):\n{self.log_tail()}")

    @staticmethod
    def _ports_open(brokers: dict[int, tuple[str, int]]) -> bool:
        for host, port in brokers.values():
            try:
                socket.create_connection((host, port), timeout=1).close()
            except OSError:
                return False
        return True

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (graceful drain), then SIGKILL after ``timeout``; the exit code if known."""
        if self.pid is None:
            return None
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            self.pid = None
            return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None:
                if self.proc.poll() is not None:
                    break
            elif not _alive(self.pid):
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
        code = self.proc.wait() if self.proc is not None else None
        self.pid = None
        return code

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_records(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return True
