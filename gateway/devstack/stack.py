"""``kgw dev up|down|demo``: a 3-node cluster and a gateway in front of it, on loopback."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from .gateway_proc import GatewayProcess, _alive, dev_config, pick_ports
from .kafka_cluster import KafkaCluster

log = logging.getLogger("kgw.dev")
STACK_FILE = "stack.json"


def up(directory: Path, nodes: int = 3) -> dict[str, Any]:
    """Start the cluster and a gateway (both outlive this process); write stack.json."""
    directory = directory.resolve()
    if (directory / STACK_FILE).exists():
        raise SystemExit(
            f"{directory / STACK_FILE} exists: run 'kgw dev down --dir {directory}' first"
        )
    directory.mkdir(parents=True, exist_ok=True)
    cluster = KafkaCluster(directory / "kafka", nodes=nodes)
    cluster.start()
    cluster.detach()
    bootstrap_port, base = pick_ports()
    gateway = GatewayProcess(
        directory / "gateway", dev_config(cluster.bootstrap_servers, bootstrap_port, base)
    )
    try:
        gateway.start(expected_brokers=nodes, detach=True)
    except Exception:
        gateway.stop()
        cluster.stop()
        raise
    info: dict[str, Any] = {
        "gateway": {
            "bootstrap": gateway.bootstrap,
            "broker_port_base": base,
            "pid": gateway.pid,
            "config": str(gateway.config_path),
            "log": str(gateway.log_path),
        },
        "brokers_direct": {str(n): f"{h}:{p}" for n, (h, p) in cluster.brokers.items()},
        "cluster_pids": {str(n): pid for n, pid in cluster.pids.items()},
        "cluster_dir": str(cluster.workdir),
    }
    (directory / STACK_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return info


def down(directory: Path) -> None:
    """Stop the gateway (graceful drain) and the cluster that ``up`` started."""
    directory = directory.resolve()
    stack_file = directory / STACK_FILE
    if not stack_file.exists():
        raise SystemExit(f"no {stack_file}: nothing to stop")
    info = json.loads(stack_file.read_text())
    gateway = GatewayProcess(directory / "gateway", {})
    gateway.pid = int(info["gateway"]["pid"])
    if _alive(gateway.pid):
        gateway.stop()
    KafkaCluster.load(Path(info["cluster_dir"])).stop()
    stack_file.unlink()


def demo(directory: Path, records: int = 10_000) -> int:
    """Produce and consume through the gateway; check no broker address leaks."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    info = json.loads((directory.resolve() / STACK_FILE).read_text())
    bootstrap = info["gateway"]["bootstrap"]
    direct = set(info["brokers_direct"].values())
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    print(f"gateway bootstrap: {bootstrap} (brokers, never shown to clients: {sorted(direct)})")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(30)
    seen = {f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()}
    print(f"created topic {topic} (6 partitions, replication factor 3)")
    print(f"brokers as clients see them: {sorted(seen)}")
    leaked = seen & direct

    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for i in range(records):
        producer.produce(topic, key=f"key-{i % 100}", value=f"value-{i}", on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    elapsed = time.monotonic() - started
    print(f"produced {records} records (acks=all) in {elapsed:.1f}s, {len(failures)} failed")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + 90
    while len(values) < records and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None and message.value() is not None:
            values.add(message.value())
    consumer.close()
    print(f"consumed {len(values)} distinct records back through the gateway")
    ok = not failures and len(values) == records and not leaked
    print("demo " + ("PASSED" if ok else f"FAILED (leaked broker addresses: {sorted(leaked)})"))
    return 0 if ok else 1
