"""Record-encryption benchmark: the gateway with and without the encryption filter, in
the same run, against the same cluster.

``python -m bench.encryption [--quick] [--megabytes N] [--nodes N] [--profile]``
starts a cluster, a SoftHSM2 token (``gateway.devstack.softhsm``) with one KEK, and
two gateways: ``plain`` (no filters) and ``encrypting`` (every ``enc.`` topic
encrypted, PKCS#11 backend). For 1 KiB and 100-byte records (the same number of bytes
for both: ``--megabytes``, default 100; ``--quick``: 20) it runs Kafka's
ProducerPerformance (acks=all) and ConsumerPerformance through each gateway,
alternating, and reads each gateway's CPU time from ``/proc/<pid>/stat`` around each
run. It prints a table and writes ``bench/results/encryption-[quick-]<stamp>.json``
and ``-latest.json``: throughput (MB/s; consume: the fetch phase, without the group
join), gateway CPU-seconds per GB, and encrypting / plain ratios (issue 18's target:
>= 0.7 for throughput). ``--profile``: afterwards, a third gateway (encrypting, under
cProfile, CPU clock) gets one produce and one consume run per size; its top functions
go to ``bench/results/encryption-profile-<stamp>-<size>-<phase>.txt``. On a shared
machine wall-clock ratios are noisy: CPU per GB is the figure to trust.
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
from bench.profiling import ProfiledGateway, top_functions
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
    pid = gateway.pid
    assert pid is not None
    before = cpu_seconds(pid)
    args = perf.producer_args(topic, gateway.bootstrap, records, size, 16384, 5)
    produced = perf.parse_producer(tool(cluster, "producer-perf", args))
    middle = cpu_seconds(pid)
    args = perf.consumer_args(topic, gateway.bootstrap, records, 120_000)
    consumed = perf.parse_consumer(tool(cluster, "consumer-perf", args))
    after = cpu_seconds(pid)
    gigabytes = records * size / 1e9
    return {
        "produce": produced.as_dict(),
        "consume": consumed.as_dict(),
        "produce_mb_per_s": produced.mb_per_s,
        "consume_mb_per_s": consumed.fetch_mb_per_s,
        "produce_cpu_s": middle - before,
        "consume_cpu_s": after - middle,
        "produce_cpu_s_per_gb": (middle - before) / gigabytes,
        "consume_cpu_s_per_gb": (after - middle) / gigabytes,
    }


def ratios(plain: dict[str, Any], enc: dict[str, Any]) -> dict[str, float]:
    def ratio(a: float, b: float) -> float:
        return a / b if b else float("nan")

    return {
        "produce_throughput": ratio(enc["produce_mb_per_s"], plain["produce_mb_per_s"]),
        "consume_throughput": ratio(enc["consume_mb_per_s"], plain["consume_mb_per_s"]),
        "produce_cpu_per_gb": ratio(enc["produce_cpu_s_per_gb"], plain["produce_cpu_s_per_gb"]),
        "consume_cpu_per_gb": ratio(enc["consume_cpu_s_per_gb"], plain["consume_cpu_s_per_gb"]),
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'size':>6} {'phase':<8} {'plain MB/s':>10} {'enc MB/s':>9} {'ratio':>6}"
        f" {'plain CPU-s/GB':>14} {'enc CPU-s/GB':>12}  target >= 0.7"
    ]
    for size, runs in results.items():
        plain, enc, r = runs["plain"], runs["encrypting"], runs["ratios"]
        for phase in ("produce", "consume"):
            ratio = r[f"{phase}_throughput"]
            lines.append(
                f"{size:>6} {phase:<8} {plain[f'{phase}_mb_per_s']:>10.2f}"
                f" {enc[f'{phase}_mb_per_s']:>9.2f} {ratio:>6.2f}"
                f" {plain[f'{phase}_cpu_s_per_gb']:>14.2f} {enc[f'{phase}_cpu_s_per_gb']:>12.2f}"
                f"  {'met' if ratio >= 0.7 else 'NOT met'}"
            )
    return "\n".join(lines)


def profile(
    cluster: KafkaCluster,
    admin: AdminClient,
    root: Path,
    config: dict[str, Any],
    nodes: int,
    sizes: dict[int, int],
    stamp: str,
) -> dict[str, str]:
    """One produce and one consume run per size through an encrypting gateway under
    cProfile; the top functions of each window to ``bench/results``."""
    prefix = root / "profile" / "window"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    gateway = ProfiledGateway(root / "gw-profiled", config, prefix, "cprofile")
    gateway.start(expected_brokers=nodes)
    files: dict[str, str] = {}
    index = 0
    try:
        for size, records in sizes.items():
            topic = f"enc.bench-profile-{size}-{int(time.time())}"
            admin.create_topics([NewTopic(topic, PARTITIONS, min(3, nodes))])[topic].result(60)
            for phase in ("produce", "consume"):
                index += 1
                gateway.begin_window()
                if phase == "produce":
                    args = perf.producer_args(topic, gateway.bootstrap, records, size, 16384, 5)
                    tool(cluster, "producer-perf", args)
                else:
                    args = perf.consumer_args(topic, gateway.bootstrap, records, 120_000)
                    tool(cluster, "consumer-perf", args)
                window = gateway.end_window(index)
                path = RESULTS / f"encryption-profile-{stamp}-{size}-{phase}.txt"
                head = f"{records} records of {size} B, {phase}; profile window: {window}\n"
                path.write_text(head + "\n" + top_functions(prefix, index, "cprofile"))
                files[f"{size}-{phase}"] = str(path)
                say(f"profile written to {path}")
    finally:
        gateway.stop()
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 MB per size")
    parser.add_argument("--megabytes", type=int, default=0, help="MB per size (default 100)")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="also profile (cProfile)")
    a = parser.parse_args(argv)
    megabytes = a.megabytes or (20 if a.quick else 100)
    sizes = {size: megabytes * 1_000_000 // size for size in SIZES}
    started = time.monotonic()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    root = Path(tempfile.mkdtemp(prefix="kgw-bench-enc-"))
    hsm = SoftHsm(root / "hsm").start()
    os.environ.update(hsm.env)
    kms = Pkcs11Kms(KmsConfig.model_validate(hsm.kms_config()).pkcs11)  # type: ignore[arg-type]
    kms.create("default")
    kms.close()
    cluster = KafkaCluster(root / "kafka", nodes=a.nodes)
    gateways: dict[str, GatewayProcess] = {}
    results: dict[str, Any] = {}
    profiles: dict[str, str] = {}
    try:
        cluster.start()
        encrypting = {
            "module": "gateway.encryption:EncryptionFilter",
            "config": {
                "kms": hsm.kms_config(),
                "policies": [{"tenant": "*", "prefixes": ["enc."]}],
            },
        }
        configs = {}
        for name, filters in (("plain", []), ("encrypting", [encrypting])):
            port, base = pick_ports()
            configs[name] = dev_config(cluster.bootstrap_servers, port, base, filters=filters)
            gateways[name] = GatewayProcess(root / f"gw-{name}", configs[name])
            gateways[name].start(expected_brokers=a.nodes)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for size, records in sizes.items():
            runs: dict[str, Any] = {}
            for name in ("plain", "encrypting"):
                topic = f"enc.bench-{name}-{size}-{int(time.time())}"
                future = admin.create_topics([NewTopic(topic, PARTITIONS, min(3, a.nodes))])
                future[topic].result(60)
                say(f"{size} B records through {name}: {records} records")
                runs[name] = run_one(cluster, gateways[name], topic, records, size)
            runs["ratios"] = ratios(runs["plain"], runs["encrypting"])
            say(f"{size} B ratios (encrypting / plain): {json.dumps(runs['ratios'])}")
            results[str(size)] = runs
        for gateway in gateways.values():
            gateway.stop()
        gateways.clear()
        if a.profile:
            port, base = pick_ports()
            config = dev_config(cluster.bootstrap_servers, port, base, filters=[encrypting])
            profile_sizes = {size: records // 2 for size, records in sizes.items()}
            profiles = profile(cluster, admin, root, config, a.nodes, profile_sizes, stamp)
    finally:
        for gateway in gateways.values():
            gateway.stop()
        cluster.stop()
    elapsed = time.monotonic() - started
    say("\n" + table(results))
    say(f"duration: {elapsed:.0f} s; load average at the end: {os.getloadavg()}")
    doc = {
        "bench": "encryption",
        "at": datetime.now(UTC).isoformat(),
        "mode": "quick" if a.quick else "full",
        "megabytes_per_size": megabytes,
        "records": sizes,
        "nodes": a.nodes,
        "duration_s": elapsed,
        "load_average_at_end": os.getloadavg(),
        "note": "on a shared, contended machine wall-clock ratios are noisy; CPU per GB holds",
        "results": results,
        "profiles": profiles,
    }
    RESULTS.mkdir(exist_ok=True)
    name = "encryption-quick" if a.quick else "encryption"
    text = json.dumps(doc, indent=2) + "\n"
    (RESULTS / f"{name}-{stamp}.json").write_text(text, encoding="utf-8")
    out = RESULTS / f"{name}-latest.json"
    out.write_text(text, encoding="utf-8")
    say(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
