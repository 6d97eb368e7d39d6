"""Acceptance for service monitoring (issue 20), with a real Prometheus scraping the gateway.

Its own three-node cluster (a broker is killed) and its own gateway with monitoring on
(short intervals) and the canary going through the public listener. Prometheus (Debian's
package, on loopback) evaluates the committed alert rules with ``for:`` and range windows
shortened for the test. In order:

- per-tenant lag, per group and partition, equals ``kafka-consumer-groups.sh --describe``
  on the same cluster, for a classic group and a KIP-848 (``consumer`` protocol) group;
- a stopped consumer's lag, growing past the tenant's threshold, fires its alert;
- killing a broker fires the offline-partitions (a topic with one replica on it) and
  under-replicated alerts and dips the canary's availability; after it restarts the
  alerts clear and availability is back to 1, with no canary record lost;
- ``kgw status --json`` shows the cluster, the canary and the lagging tenant.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.devstack.nodes import free_ports
from gateway.monitoring.status import samples
from tests.integration.prometheus_server import PrometheusServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "kgw-alerts.yml"
TENANT_TOPIC = "acme.orders"
SINGLE_TOPIC = "acme.single"  # one replica, on the broker the test kills
KILLED = 3
THRESHOLD = 50
GROUPS = {"acme.classic": "classic", "acme.kip848": "consumer"}
WAIT_S = 180.0


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(1.0)


def shortened_rules() -> dict[str, Any]:
    """The committed rules with short ``for:`` and range windows, so the test takes minutes."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "2s"
            rule["expr"] = rule["expr"].replace("[10m]", "[30s]")
    return dict(rules)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    kafka = KafkaCluster(tmp_path_factory.mktemp("kafka-monitoring"), nodes=3)
    kafka.start(timeout=300)  # a contended machine: generous
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def gateway(
    cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    bootstrap_port, base = pick_ports()
    (metrics_port,) = free_ports("127.0.0.1", 1)
    monitoring = {
        "health": {"interval_s": 1, "expected_brokers": 3},
        "lag": {"interval_s": 1, "threshold": THRESHOLD, "partition_metrics": True,
                "rate_window_s": 30},
        "canary": {"enabled": True, "interval_s": 0.5, "window_s": 10, "lost_after_s": 90,
                   "timeout_s": 3},
    }  # fmt: skip
    config = dev_config(
        cluster.bootstrap_servers, bootstrap_port, base,
        metrics={"port": metrics_port}, monitoring=monitoring,
    )  # fmt: skip
    process = GatewayProcess(tmp_path_factory.mktemp("gateway-monitoring"), config)
    process.start(expected_brokers=3)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def prometheus(
    gateway: GatewayProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    target = f"127.0.0.1:{gateway.config['metrics']['port']}"
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), [target], shortened_rules())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def metrics_url(gateway: GatewayProcess) -> str:
    return f"http://127.0.0.1:{gateway.config['metrics']['port']}/metrics"


def scrape(gateway: GatewayProcess) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(metrics_url(gateway), timeout=10) as response:
        return samples(response.read().decode())


def gateway_lag(gateway: GatewayProcess) -> dict[str, dict[tuple[str, int], int]]:
    out: dict[str, dict[tuple[str, int], int]] = {}
    for labels, value in scrape(gateway).get("kgw_consumer_partition_lag_records", []):
        tp = (labels["topic"], int(labels["partition"]))
        out.setdefault(labels["group"], {})[tp] = int(value)
    return out


def tool_lag(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    """Lag per partition as ``kafka-consumer-groups.sh --describe`` prints it."""
    result = cluster.run_tool(
        "consumer-groups",
        ["--bootstrap-server", cluster.bootstrap_servers, "--describe", "--group", group],
        timeout=120,
    )
    text = result.stdout.decode()
    assert result.returncode == 0, text + result.stderr.decode()
    lags: dict[tuple[str, int], int] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        cols = line.split()
        if cols[:1] == ["GROUP"]:
            header = cols
            continue
        if header is None or len(cols) < len(header) or cols[0] != group:
            continue
        row = dict(zip(header, cols, strict=False))
        if row["LAG"].isdigit():
            lags[(row["TOPIC"], int(row["PARTITION"]))] = int(row["LAG"])
    return lags


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"r%d" % i, partition=i % 3)
    assert producer.flush(60) == 0


def consume_and_stop(bootstrap: str, group: str, protocol: str, expected: int) -> None:
    """A consumer that reads ``expected`` records, commits, and stops for good."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}  # fmt: skip
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    consumer.subscribe([TENANT_TOPIC])
    seen = 0
    deadline = time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    assert seen >= expected, f"{group} consumed {seen} of {expected}"
    consumer.commit(asynchronous=False)
    consumer.close()


def test_monitoring_end_to_end(
    cluster: KafkaCluster, gateway: GatewayProcess, prometheus: PrometheusServer
) -> None:
    bootstrap = cluster.bootstrap_servers
    wait_until(prometheus.targets_up, "Prometheus scraping the gateway")
    wait_until(lambda: prometheus.value("kgw_canary_availability_ratio") == 1.0, "the canary at 1")
    assert prometheus.value("kgw_cluster_brokers_registered") == 3

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic(TENANT_TOPIC, num_partitions=3, replication_factor=3),
        NewTopic(SINGLE_TOPIC, num_partitions=1, replica_assignment=[[KILLED]]),
    ])  # fmt: skip
    for future in futures.values():
        future.result(60)

    # Lag: two groups (classic, KIP-848) read 300 records and stop; 200 more arrive.
    produce(bootstrap, TENANT_TOPIC, 300)
    for group, protocol in GROUPS.items():
        consume_and_stop(bootstrap, group, protocol, 300)
    produce(bootstrap, TENANT_TOPIC, 200)

    def lag_matches() -> bool:
        ours = gateway_lag(gateway)
        return all(ours.get(g) and ours[g] == tool_lag(cluster, g) for g in GROUPS)

    wait_until(lag_matches, "the gateway's lag to equal kafka-consumer-groups.sh --describe")
    ours = gateway_lag(gateway)
    for group in GROUPS:
        assert sum(ours[group].values()) == 200, ours
    types = {
        labels["group"]: labels["type"]
        for labels, _ in scrape(gateway)["kgw_consumer_group_lag_records"]
    }
    assert types == GROUPS

    # A stopped consumer's lag grows past the threshold: its alert fires.
    stop = threading.Event()

    def trickle() -> None:
        producer = Producer({"bootstrap.servers": bootstrap})
        while not stop.is_set():
            producer.produce(TENANT_TOPIC, value=b"more")
            producer.poll(0)
            time.sleep(0.2)
        producer.flush(30)

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        firing = wait_until(
            lambda: prometheus.firing("KgwConsumerLagAboveThreshold"), "the lag alert"
        )
        assert {a["labels"]["group"] for a in firing} <= set(GROUPS)
        assert all(a["labels"]["tenant"] == "acme" for a in firing)
    finally:
        stop.set()
        feeder.join(30)

    # A broker dies: offline and under-replicated partitions alert, the canary dips.
    wait_until(lambda: prometheus.value("max(kgw_cluster_offline_partitions)") == 0.0, "no offline")
    killed_at = time.monotonic()
    cluster.kill_broker(KILLED)
    wait_until(lambda: prometheus.firing("KafkaOfflinePartitions"), "the offline-partitions alert")
    wait_until(lambda: prometheus.firing("KafkaUnderReplicatedPartitions"), "the URP alert")
    wait_until(lambda: prometheus.firing("KafkaBrokersMissing"), "the missing-broker alert")
    window = f"{int(time.monotonic() - killed_at) + 30}s"
    dip = wait_until(
        lambda: (
            (v := prometheus.value(f"min_over_time(kgw_canary_availability_ratio[{window}])"))
            is not None
            and v < 1.0
            and v
        ),
        "the canary's availability to dip",
    )
    assert dip < 1.0

    # It comes back: the alerts clear, availability recovers, nothing was lost.
    cluster.start_broker(KILLED, timeout=300)
    for alert in (
        "KafkaOfflinePartitions",
        "KafkaUnderReplicatedPartitions",
        "KafkaBrokersMissing",
    ):
        wait_until(lambda a=alert: not prometheus.firing(a), f"{alert} to clear")  # type: ignore[misc]
    wait_until(
        lambda: prometheus.value("kgw_canary_availability_ratio") == 1.0, "the canary back at 1"
    )
    assert prometheus.value("max(kgw_cluster_offline_partitions)") == 0.0
    found = scrape(gateway)
    assert found["kgw_canary_lost_records_total"][0][1] == 0
    assert found["kgw_canary_duplicated_records_total"][0][1] == 0
    assert found["kgw_canary_fetched_records_total"][0][1] > 0

    # kgw status --json: the same picture, for scripts.
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "status", "--json", "--url", metrics_url(gateway)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["cluster"]["brokers_registered"] == 3
    assert summary["cluster"]["offline_partitions"] == 0
    assert summary["canary"]["lost"] == 0
    assert summary["lag"][0]["tenant"] == "acme" and summary["lag"][0]["lag"] > THRESHOLD
    assert summary["gateways"][0]["up"] is True
