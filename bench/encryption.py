"""Record-encryption benchmark: the gateway with and without the encryption filter, in
the same run, against the same cluster.

``python -m bench.encryption [--records N] [--nodes N]`` starts a cluster, a SoftHSM2
token (``gateway.devstack.softhsm``) with one KEK, and two gateways: ``plain`` (no
filters) and ``encrypting`` (every ``enc.`` topic encrypted, PKCS#11 backend). For
1 KiB and 100-byte records it runs Kafka's ProducerPerformance (acks=all) and
ConsumerPerformance through each gateway, alternating, and reads each gateway's CPU
time from ``/proc/<pid>/stat`` around each run. It prints and writes to
``bench/results/encryption-latest.json``: throughput (records/s, MB/s), gateway
CPU-seconds per GB, and encrypting / plain ratios (issue 18's target: >= 0.7 for
throughput). On a shared machine wall-clock ratios are noisy: CPU per GB is the
figure to trust.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/encryption.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka.admin import AdminClient, NewTopic

from bench import perf
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.devstack.softhsm import SoftHsm
from gateway.kms.pkcs11 import Pkcs11Kms
from gateway.kms.settings import KmsConfig

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 3
SIZES = (1024, 100)


def say(text: str) -> None:
    print(text, flush=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tool(cluster: KafkaCluster, name: str, args: list[str]) -> str:
    proc = cluster.run_tool(name, args, timeout=900)
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")
        raise RuntimeError(f"{name} exited with {proc.returncode}:\n{(out + err)[-3000:]}")
    return out


def run_one(
    cluster: KafkaCluster, gateway: GatewayProcess, topic: str, records: int, size: int
) -> dict[str, Any]:
    before = cpu_seconds(gateway.pid)
    args = perf.producer_args(topic, gateway.bootstrap, records, size, 16384, 5)
    produced = perf.parse_producer(tool(cluster, "producer-perf", args))
    middle = cpu_seconds(gateway.pid)
    args = perf.consumer_args(topic, gateway.bootstrap, records, 120_000)
    consumed = perf.parse_consumer(tool(cluster, "consumer-perf", args))
    after = cpu_seconds(gateway.pid)
    gigabytes = records * size / 1e9
    return {
        "produce": produced.as_dict(),
        "consume": consumed.as_dict(),
        "produce_cpu_s": middle - before,
        "consume_cpu_s": after - middle,
        "produce_cpu_s_per_gb": (middle - before) / gigabytes,
        "consume_cpu_s_per_gb": (after - middle) / gigabytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1)
    a = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kgw-bench-enc-"))
    hsm = SoftHsm(root / "hsm").start()
    os.environ.update(hsm.env)
    kms = Pkcs11Kms(KmsConfig.model_validate(hsm.kms_config()).pkcs11)  # type: ignore[arg-type]
    kms.create("default")
    kms.close()
    cluster = KafkaCluster(root / "kafka", nodes=a.nodes)
    gateways: dict[str, GatewayProcess] = {}
    results: dict[str, Any] = {}
    try:
        cluster.start()
        encrypting = {
            "module": "gateway.encryption:EncryptionFilter",
            "config": {
                "kms": hsm.kms_config(),
                "policies": [{"tenant": "*", "prefixes": ["enc."]}],
            },
        }
        for name, filters in (("plain", []), ("encrypting", [encrypting])):
            port, base = pick_ports()
            config = dev_config(cluster.bootstrap_servers, port, base, filters=filters)
            gateways[name] = GatewayProcess(root / f"gw-{name}", config)
            gateways[name].start(expected_brokers=a.nodes)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for size in SIZES:
            runs: dict[str, Any] = {}
            for name in ("plain", "encrypting"):
                topic = f"enc.bench-{name}-{size}-{int(time.time())}"
                future = admin.create_topics([NewTopic(topic, PARTITIONS, min(3, a.nodes))])
                future[topic].result(60)
                say(f"{size} B records through {name}: {a.records} records")
                runs[name] = run_one(cluster, gateways[name], topic, a.records, size)
                say(json.dumps(runs[name], indent=None)[:400])
            plain, enc = runs["plain"], runs["encrypting"]
            runs["ratios"] = {
                "produce_throughput": enc["produce"]["mb_per_s"] / plain["produce"]["mb_per_s"],
                "consume_throughput": enc["consume"]["mb_per_s"] / plain["consume"]["mb_per_s"],
                "produce_cpu_per_gb": enc["produce_cpu_s_per_gb"] / plain["produce_cpu_s_per_gb"],
                "consume_cpu_per_gb": enc["consume_cpu_s_per_gb"] / plain["consume_cpu_s_per_gb"],
            }
            say(f"{size} B ratios (encrypting / plain): {json.dumps(runs['ratios'])}")
            results[str(size)] = runs
    finally:
        for gateway in gateways.values():
            gateway.stop()
        cluster.stop()
    doc = {
        "bench": "encryption",
        "at": datetime.now(UTC).isoformat(),
        "records": a.records,
        "nodes": a.nodes,
        "load_average_at_end": os.getloadavg(),
        "note": "measured on a shared, contended machine: wall-clock ratios are noisy",
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "encryption-latest.json"
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    say(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
