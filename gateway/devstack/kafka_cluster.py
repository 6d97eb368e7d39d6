"""A real Apache Kafka KRaft cluster on loopback, for tests and the dev stack.

Nodes 1..N are broker+controller with static ``controller.quorum.voters``;
:meth:`KafkaCluster.add_broker` adds broker-only nodes. Every node is its own
``java kafka.Kafka`` process in its own session, with files under ``workdir``:
``node-<id>/server.properties``, ``node-<id>/data``, ``node-<id>/stdout.log``
(JVM stdout/stderr) and ``node-<id>/server.log`` (log4j2, WARN+). The state
needed to find and stop the processes again is kept in ``workdir/cluster.json``.

``security_protocol="SASL_PLAINTEXT"`` (or ``SASL_SSL``) with ``sasl_users``
gives every node a SASL listener with those users for each of ``sasl_mechanisms``:
SCRAM credentials are written into the metadata at format time (kafka-storage's
``--add-scram``), PLAIN users go in the listener's JAAS configuration. An
``admin`` user with a random password is added for the brokers' own
connections and the readiness probe.

CLI: ``python -m gateway.devstack.kafka_cluster up --dir D [--nodes 3]`` starts a
detached cluster; ``down --dir D`` stops it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gateway.devstack import broker_sasl, kafka_dist

from .nodes import free_ports, metadata_ok, pid_runs, send_signal

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
STOP_GRACE_S = 30.0


@dataclass
class NodeSpec:
    """One node's fixed identity: id, roles and loopback ports."""

    node_id: int
    roles: str  # "broker,controller" or "broker"
    port: int
    controller_port: int | None = None
    pid: int | None = None


class KafkaCluster:
    """A KRaft cluster of ``nodes`` combined broker+controller nodes under ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        nodes: int = 3,
        libs: Path | None = None,
        host: str = "127.0.0.1",
        heap: str = "512m",
        extra_broker_props: dict[str, str] | None = None,
        security_protocol: str = "PLAINTEXT",
        client_config: dict[str, str] | None = None,
        sasl_users: dict[str, str] | None = None,
        sasl_mechanisms: tuple[str, ...] = ("SCRAM-SHA-512", "PLAIN"),
        acl_super_users: tuple[str, ...] | None = None,
    ) -> None:
        """``security_protocol="SSL"`` gives every node an SSL listener only (the controller
        listener stays internal and plaintext); the ``ssl.*`` settings then go in
        ``extra_broker_props`` and ``client_config`` holds the librdkafka settings the
        readiness probe needs (``security.protocol``, ``ssl.ca.location``, …).

        ``security_protocol="SASL_PLAINTEXT"``/``"SASL_SSL"``: ``sasl_users`` (name →
        password, letters, digits and ``_.~-`` only) may log in with each of
        ``sasl_mechanisms``; ``client_config`` starts from the ``admin`` user's login.

        ``acl_super_users`` (with SASL): the brokers run KRaft's ``StandardAuthorizer``
        (deny by default) with these principals, ``admin`` and the internal controller
        listener's ``User:ANONYMOUS`` as super users (``broker_sasl.authorizer_properties``)."""
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.sasl_mechanisms = tuple(sasl_mechanisms)
        self.sasl_users = dict(sasl_users or {})
        if security_protocol.startswith("SASL_"):
            broker_sasl.check(self.sasl_mechanisms, self.sasl_users)
            self.sasl_users.setdefault(broker_sasl.ADMIN, secrets.token_hex(16))
        elif self.sasl_users:
            raise ValueError(f"sasl_users need a SASL security protocol, not {security_protocol}")
        self.workdir = Path(workdir).resolve()
        self.voters = nodes
        self.libs = libs if libs is not None else kafka_dist.ensure_kafka()
        self.host = host
        self.heap = heap
        self.extra_broker_props = dict(extra_broker_props or {})
        self.security_protocol = security_protocol
        if acl_super_users is not None and not security_protocol.startswith("SASL_"):
            raise ValueError("acl_super_users need a SASL security protocol")
        self.acl_super_users = acl_super_users
        admin = (
            broker_sasl.admin_client_config(
                security_protocol, self.sasl_mechanisms, self.sasl_users
            )
            if security_protocol.startswith("SASL_")
            else {}
        )
        self.client_config = {**admin, **(client_config or {})}
        self.cluster_id = kafka_dist.random_uuid()
        ports = free_ports(host, 2 * nodes)
        self.nodes: dict[int, NodeSpec] = {
            i: NodeSpec(i, "broker,controller", ports[2 * i - 2], ports[2 * i - 1])
            for i in range(1, nodes + 1)
        }
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._atexit_registered = False

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        return {i: (self.host, n.port) for i, n in sorted(self.nodes.items())}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.brokers.values())

    @property
    def pids(self) -> dict[int, int]:
        """Node id -> pid of each node process that is currently alive."""
        return {i: n.pid for i, n in sorted(self.nodes.items()) if n.pid and self._alive(i)}

    def start(self, timeout: float = 120) -> None:
        """Start every node and wait until each serves metadata listing all brokers."""
        if self.pids:
            raise RuntimeError(f"cluster in {self.workdir} is already running: {self.pids}")
        deadline = time.monotonic() + timeout
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._format(list(self.nodes), deadline)
        try:
            for node_id in self.nodes:
                self._launch(node_id)
            self._wait_ready(set(self.nodes), deadline)
        except BaseException:
            self.stop()
            raise
        log.info("kafka cluster up: %s (%s)", self.bootstrap_servers, self.workdir)

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL what is left after 30 s. Safe to call twice."""
        running = self.pids
        for pid in running.values():
            send_signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for node_id, pid in running.items():
            if not self._wait_exit(node_id, deadline):
                log.warning("kafka node %d (pid %d) ignored SIGTERM; killing", node_id, pid)
                send_signal(pid, signal.SIGKILL)
                self._wait_exit(node_id, time.monotonic() + 10)
        for node in self.nodes.values():
            node.pid = None
        self._procs.clear()
        if self.workdir.is_dir():
            self._save()

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one node (no clean shutdown) and wait for the process to be gone."""
        pid = self.pids.get(node_id)
        if pid is None:
            raise RuntimeError(f"kafka node {node_id} is not running")
        send_signal(pid, signal.SIGKILL)
        self._wait_exit(node_id, time.monotonic() + 30)
        self.nodes[node_id].pid = None
        self._procs.pop(node_id, None)
        self._save()

    def start_broker(self, node_id: int, timeout: float = 120) -> None:
        """Restart an existing, stopped node; return once it serves metadata listing itself."""
        if node_id not in self.nodes:
            raise KeyError(f"no kafka node {node_id}")
        if node_id in self.pids:
            raise RuntimeError(f"kafka node {node_id} is already running")
        self._launch_one(node_id, set(), time.monotonic() + timeout)

    def add_broker(self, timeout: float = 120) -> int:
        """Start a new broker-only node that joins the running cluster; return its id."""
        deadline = time.monotonic() + timeout
        node_id = max(self.nodes) + 1
        (port,) = free_ports(self.host, 1)
        self.nodes[node_id] = NodeSpec(node_id, "broker", port)
        self._format([node_id], deadline)
        self._launch_one(node_id, set(self.pids), deadline)
        return node_id

    def _launch_one(self, node_id: int, others: set[int], deadline: float) -> None:
        """Start one node; wait until its own metadata lists it and ``others``."""
        self._launch(node_id)
        try:
            self._wait_ready({node_id}, deadline, expected=others | {node_id})
        except BaseException:
            if node_id in self.pids:
                self.kill_broker(node_id)
            raise

    def detach(self) -> None:
        """Let the nodes outlive this Python process (the CLI's ``up``)."""
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
        self._procs.clear()

    def __enter__(self) -> KafkaCluster:
        if not self.pids:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def tool_argv(self, tool: str, args: list[str]) -> list[str]:
        """See :func:`kafka_dist.tool_argv` (usable without a cluster object).

        Nothing here points the tool at this cluster: pass ``--bootstrap-server``.
        """
        return kafka_dist.tool_argv(tool, args, self.libs)

    def run_tool(
        self, tool: str, args: list[str], timeout: float = 300, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return kafka_dist.run_tool(tool, args, libs=self.libs, timeout=timeout, input=input)

    @classmethod
    def load(cls, workdir: Path) -> KafkaCluster:
        """Rebuild a cluster object from ``workdir/cluster.json`` (pids included)."""
        state = json.loads((Path(workdir) / STATE_FILE).read_text())
        cluster = cls(
            workdir, nodes=int(state["voters"]), libs=Path(state["libs"]),
            host=str(state["host"]), heap=str(state["heap"]),
            extra_broker_props=dict(state["extra_broker_props"]),
            security_protocol=str(state.get("security_protocol", "PLAINTEXT")),
            client_config=dict(state.get("client_config", {})),
            sasl_users=dict(state.get("sasl_users", {})),
            sasl_mechanisms=tuple(state.get("sasl_mechanisms", ("SCRAM-SHA-512", "PLAIN"))),
            acl_super_users=(
                tuple(state["acl_super_users"]) if "acl_super_users" in state else None
            ),
        )  # fmt: skip
        cluster.cluster_id = str(state["cluster_id"])
        cluster.nodes = {int(n["node_id"]): NodeSpec(**n) for n in state["nodes"]}
        return cluster

    def _save(self) -> None:
        state: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "brokers": {str(i): list(addr) for i, addr in self.brokers.items()},
            "pids": {str(i): pid for i, pid in self.pids.items()},
            "cluster_id": self.cluster_id,
            "kafka_version": kafka_dist.KAFKA_VERSION,
            "voters": self.voters,
            "libs": str(self.libs),
            "host": self.host,
            "heap": self.heap,
            "extra_broker_props": self.extra_broker_props,
            "security_protocol": self.security_protocol,
            "client_config": self.client_config,
            "nodes": [asdict(n) for n in self.nodes.values()],
        }
        if self.sasl_users:
            state["sasl_users"] = self.sasl_users
            state["sasl_mechanisms"] = list(self.sasl_mechanisms)
        if self.acl_super_users is not None:
            state["acl_super_users"] = list(self.acl_super_users)
        tmp = self.workdir / f".{STATE_FILE}.tmp"
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.workdir / STATE_FILE)

    def _node_dir(self, node_id: int) -> Path:
        return self.workdir / f"node-{node_id}"

    @property
    def _log4j(self) -> Path:
        return self.workdir / "log4j2.properties"

    def _properties(self, node: NodeSpec) -> dict[str, str]:
        rf = min(3, self.voters)
        isr = min(2, rf)
        voters = ",".join(
            f"{n.node_id}@{self.host}:{n.controller_port}"
            for n in self.nodes.values()
            if n.controller_port is not None
        )
        protocol = self.security_protocol
        listeners = [f"{protocol}://{self.host}:{node.port}"]
        if node.controller_port is not None:
            listeners.append(f"CONTROLLER://{self.host}:{node.controller_port}")
        props = {
            "process.roles": node.roles,
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "advertised.listeners": listeners[0],
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._node_dir(node.node_id) / "data"),
            "num.partitions": "1",
            "default.replication.factor": str(rf),
            "min.insync.replicas": str(isr),
            "offsets.topic.replication.factor": str(rf),
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(isr),
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(isr),
            "share.coordinator.state.topic.num.partitions": "10",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        if self.security_protocol.startswith("SASL_"):
            props.update(
                broker_sasl.broker_properties(
                    self.security_protocol, self.sasl_mechanisms, self.sasl_users
                )
            )
        if self.acl_super_users is not None:
            props.update(broker_sasl.authorizer_properties(self.acl_super_users))
        props.update(self.extra_broker_props)
        return props

    def _write_config(self, node_id: int) -> Path:
        node_dir = self._node_dir(node_id)
        node_dir.mkdir(parents=True, exist_ok=True)
        path = node_dir / "server.properties"
        props = self._properties(self.nodes[node_id])
        lines = [f"{k}={v}".replace("\\", "\\\\") for k, v in props.items()]
        path.touch(mode=0o600)  # may hold SASL passwords
        path.write_text("\n".join(lines) + "\n")
        kafka_dist.write_log4j_config(self._log4j, "${sys:kafka.logs.dir}/server.log")
        return path

    def _jvm(self, node_id: int, main_class: str, args: list[str], heap: str) -> list[str]:
        return kafka_dist.jvm_argv(
            self.libs, main_class, args, heap=heap,
            log4j_config=self._log4j,
            jvm_opts=[f"-Dkafka.logs.dir={self._node_dir(node_id)}"],
        )  # fmt: skip

    def _format(self, node_ids: list[int], deadline: float) -> None:
        """Format the storage of nodes not yet formatted for this cluster id, in parallel."""
        procs: dict[int, subprocess.Popen[bytes]] = {}
        for node_id in node_ids:
            config = self._write_config(node_id)
            data = self._node_dir(node_id) / "data"
            if kafka_dist.formatted_cluster_id(data) == self.cluster_id:
                continue
            shutil.rmtree(data, ignore_errors=True)  # left over from another cluster
            args = ["format", "--cluster-id", self.cluster_id, "--config", str(config)]
            args += broker_sasl.scram_format_args(self.sasl_mechanisms, self.sasl_users)
            argv = self._jvm(node_id, "kafka.tools.StorageTool", args, "256m")
            procs[node_id] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        try:
            for node_id, proc in procs.items():
                try:
                    out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"formatting kafka node {node_id} timed out") from None
                if proc.returncode != 0:
                    raise RuntimeError(
                        f"kafka-storage format failed for node {node_id} "
                        f"(exit {proc.returncode}):\n{out.decode(errors='replace')[-4000:]}"
                    )
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()

    def _launch(self, node_id: int) -> None:
        config = self._write_config(node_id)
        argv = self._jvm(node_id, "kafka.Kafka", [str(config)], self.heap)
        with (self._node_dir(node_id) / "stdout.log").open("ab") as out:
            proc = subprocess.Popen(
                argv, cwd=self._node_dir(node_id), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self._procs[node_id] = proc
        self.nodes[node_id].pid = proc.pid
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        self._save()
        log.debug("started kafka node %d (pid %d)", node_id, proc.pid)

    def _alive(self, node_id: int) -> bool:
        proc = self._procs.get(node_id)
        if proc is not None:
            return proc.poll() is None
        pid = self.nodes[node_id].pid
        marker = str(self._node_dir(node_id) / "server.properties")
        return pid is not None and pid_runs(pid, marker)

    def _wait_exit(self, node_id: int, deadline: float) -> bool:
        while self._alive(node_id):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _wait_ready(
        self, node_ids: set[int], deadline: float, expected: set[int] | None = None
    ) -> None:
        """Wait until each node accepts TCP and its own Metadata answer lists ``expected``."""
        expected = set(node_ids) if expected is None else expected
        pending = set(node_ids)
        while pending:
            for node_id in sorted(pending):
                if not self._alive(node_id):
                    raise RuntimeError(
                        f"kafka node {node_id} exited during start-up; log tail:\n"
                        + self.log_tail(node_id)
                    )
                port = self.nodes[node_id].port
                if metadata_ok(self.host, port, node_id, expected, self.client_config):
                    pending.discard(node_id)
            if pending and time.monotonic() >= deadline:
                worst = min(pending)
                raise TimeoutError(
                    f"kafka nodes {sorted(pending)} not ready in time; node {worst} log tail:\n"
                    + self.log_tail(worst)
                )
            if pending:
                time.sleep(0.5)

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        """The last lines of a node's stdout.log and server.log, for error messages."""
        parts = []
        for name in ("stdout.log", "server.log"):
            try:
                text = (self._node_dir(node_id) / name).read_text(errors="replace")
            except OSError:
                continue
            parts.append(f"--- {name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts) or "(no log output)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.devstack.kafka_cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a detached cluster (reuses DIR/cluster.json)")
    up.add_argument("--dir", type=Path, required=True)
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--heap", default="512m")
    up.add_argument("--timeout", type=float, default=180)
    up.add_argument("--fresh", action="store_true", help="discard an existing cluster in DIR")
    down = sub.add_parser("down", help="stop the cluster recorded in DIR/cluster.json")
    down.add_argument("--dir", type=Path, required=True)
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    state = opts.dir / STATE_FILE
    try:
        if opts.command == "down":
            if not state.is_file():
                print(f"no cluster recorded in {state}", file=sys.stderr)
                return 1
            KafkaCluster.load(opts.dir).stop()
            return 0
        if state.is_file() and not opts.fresh:
            cluster = KafkaCluster.load(opts.dir)
            if cluster.pids:
                print(cluster.bootstrap_servers)
                return 0
        else:
            if state.is_file():
                KafkaCluster.load(opts.dir).stop()
            cluster = KafkaCluster(opts.dir, nodes=opts.nodes, heap=opts.heap)
        cluster.start(timeout=opts.timeout)
        cluster.detach()
    except (RuntimeError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(cluster.bootstrap_servers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
