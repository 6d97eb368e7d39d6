"""``kgw dev up|down|demo``: a 3-node cluster and a gateway in front of it, on loopback.

The gateway has two listeners. ``local`` is plaintext with the fixed principal
``User:dev-admin``, a super user (the operator's door: create topics, anything).
``tenants`` takes SASL (PLAIN API keys, SCRAM) and is what ``kgw tenant create``
writes bundles for. Authorization, quotas (three plans), the access log, the audit
trail and the metrics endpoint are on, with every store in the stack directory.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from .gateway_proc import DEV_MAX_NODE_ID, GatewayProcess, _alive, dev_config, pick_ports
from .kafka_cluster import KafkaCluster

log = logging.getLogger("kgw.dev")
STACK_FILE = "stack.json"
POLICIES = Path(__file__).resolve().parents[2] / "policies"
ADMIN = "User:dev-admin"
PLANS: dict[str, dict[str, int]] = {
    "bronze": {
        "produce_bytes": 1 << 20, "produce_bytes_burst": 4 << 20, "fetch_bytes": 2 << 20,
        "requests": 200, "max_connections": 50, "max_topics": 10,
        "max_partitions_per_topic": 6, "max_total_partitions": 30,
    },
    "silver": {
        "produce_bytes": 8 << 20, "produce_bytes_burst": 32 << 20, "fetch_bytes": 16 << 20,
        "requests": 2000, "max_connections": 200, "max_topics": 50,
        "max_partitions_per_topic": 12, "max_total_partitions": 300,
    },
    "gold": {
        "produce_bytes": 64 << 20, "produce_bytes_burst": 256 << 20, "fetch_bytes": 128 << 20,
        "requests": 20000, "max_connections": 1000, "max_topics": 500,
        "max_partitions_per_topic": 48, "max_total_partitions": 5000,
    },
}  # fmt: skip


def stack_config(directory: Path, bootstrap_servers: str) -> dict[str, Any]:
    """The dev gateway's configuration; its stores and logs live under ``directory``."""
    policy_dir = directory / "policies"
    policy_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(POLICIES / "model.conf", policy_dir / "model.conf")
    (policy_dir / "policy.csv").write_text(
        "# dev stack: rules written by kgw tenant / kgw policy\n"
    )
    bootstrap_port, base = pick_ports()
    local_ports = range(bootstrap_port, base + DEV_MAX_NODE_ID + 1)
    tenant_bootstrap, tenant_base = pick_ports(avoid=local_ports)
    config = dev_config(bootstrap_servers, bootstrap_port, base)
    config["listeners"][0]["principal"] = ADMIN
    config["listeners"].append(
        {
            "name": "tenants", "bind_host": "127.0.0.1", "bootstrap_port": tenant_bootstrap,
            "broker_port_base": tenant_base, "advertised_host": "127.0.0.1",
            "max_node_id": config["listeners"][0]["max_node_id"], "authentication": "sasl",
        }
    )  # fmt: skip
    config |= {
        "sasl": {
            "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
            "credential_store": {"file": str(directory / "credentials.json")},
        },
        "authorization": {"policy_dir": str(policy_dir), "super_users": [ADMIN]},
        "quotas": {"store_file": str(directory / "quotas.json"), "plans": PLANS},
        "accesslog": {"path": str(directory / "access.log")},
        "audit": {"trail": str(directory / "audit.jsonl")},
    }
    return config


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
    config = stack_config(directory, cluster.bootstrap_servers)
    gateway = GatewayProcess(directory / "gateway", config)
    try:
        gateway.start(expected_brokers=nodes, detach=True)
    except Exception:
        gateway.stop()
        cluster.stop()
        raise
    info: dict[str, Any] = {
        "gateway": {
            "bootstrap": gateway.bootstrap,
            "broker_port_base": config["listeners"][0]["broker_port_base"],
            "tenants_bootstrap": f"127.0.0.1:{config['listeners'][1]['bootstrap_port']}",
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
    if leaked:
        print(f"FAILED: broker addresses leaked to the client: {sorted(leaked)}")
    tenant_ok = tenant_demo(directory.resolve(), info, topic)
    print("demo " + ("PASSED" if ok and tenant_ok else "FAILED"))
    return 0 if ok and tenant_ok else 1


def _kgw(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def tenant_demo(directory: Path, info: dict[str, Any], outside_topic: str) -> bool:
    """Onboard a tenant with ``kgw tenant create``, use its bundle on the SASL listener
    inside its namespace, be refused outside it, then verify the audit trail."""
    from confluent_kafka import Consumer, KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    config = info["gateway"]["config"]
    name = f"demo-{uuid.uuid4().hex[:6]}"
    bundle = directory / "tenants" / name
    made = _kgw("tenant", "create", name, "--plan", "bronze", "--config", config,
                "--bundle-dir", str(bundle), "--json")  # fmt: skip
    if made.returncode != 0:
        print(f"FAILED: kgw tenant create: {made.stderr.strip()}")
        return False
    prefix = json.loads(made.stdout)["prefix"]
    print(f"tenant {name} (plan bronze, namespace {prefix}*): bundle in {bundle}")
    conf = json.loads((bundle / "confluent-kafka.json").read_text())
    print(f"  connects to {conf['bootstrap.servers']} with SASL {conf.get('sasl.mechanism')}")
    topic = f"{prefix}orders"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(1000):
        producer.produce(topic, value=f"order-{i}".encode())
    unsent = producer.flush(30)
    consumer = Consumer({**conf, "group.id": f"{prefix}readers", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(got) < 1000 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None and message.value() is not None:
            got.add(message.value())
    consumer.close()
    print(f"  produced 1000 records to {topic} ({unsent} unsent), consumed {len(got)} back")
    refused: list[int] = []
    outsider = Producer({**conf, "acks": "all", "message.timeout.ms": 10_000})
    outsider.produce(outside_topic, value=b"x", on_delivery=lambda e, _m: refused.append(
        e.code() if e is not None else 0))  # fmt: skip
    outsider.flush(15)
    denied = refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    print(
        f"  writing to {outside_topic} (outside its namespace): "
        + ("refused, TOPIC_AUTHORIZATION_FAILED" if denied else f"NOT refused: {refused}")
    )
    verified = _kgw("audit", "verify", "--config", config)
    print(f"  audit trail: {verified.stdout.strip().splitlines()[-1] if verified.stdout else ''}"
          + ("" if verified.returncode == 0 else f" (exit {verified.returncode})"))  # fmt: skip
    return unsent == 0 and len(got) == 1000 and denied and verified.returncode == 0
