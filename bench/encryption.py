"""Record-encryption benchmark: the gateway with and without the encryption filter, in
the same run, against the same cluster.

``python -m bench.encryption [--quick] [--megabytes N] [--nodes N] [--profile]``
starts a cluster, a SoftHSM2 token (``gateway.devstack.softhsm``) with one KEK, and
two gateways: ``plain`` (no filters) and ``encrypting`` (PKCS#11 backend; ``enc.b.``
topics sealed per batch, granularity ``batch``, wire format 2; other ``enc.`` topics
per record, granularity ``record``, format 1). For 1 KiB and 100-byte records (the
same number of bytes for both: ``--megabytes``, default 100; ``--quick``: 20) it runs
Kafka's ProducerPerformance (acks=all) and ConsumerPerformance through the plain
gateway, then the encrypting one with each granularity, and reads each gateway's CPU
time from ``/proc/<pid>/stat`` around each run. Then, in process (no sockets), the
filter's own CPU per GB for each granularity (``filter_cpu_s_per_gb``). It prints a
table and writes ``bench/results/encryption-[quick-]<stamp>.json`` and
``-latest.json``: throughput (MB/s; consume: the fetch phase, without the group join),
gateway CPU-seconds per GB, and encrypting / plain ratios per granularity (issue 18's
target: >= 0.7 for throughput). ``--profile``: afterwards, a third gateway
(encrypting, under cProfile, CPU clock) gets one produce and one consume run per size
and granularity; its top functions go to
``bench/results/encryption-profile-<stamp>-<size>-<granularity>-<phase>.txt``. On a
shared machine wall-clock ratios are noisy: CPU per GB is the figure to trust.
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
GRANULARITIES = {"record": "enc.", "batch": "enc.b."}  # topic prefixes, per the policies
POLICIES = [
    {"tenant": "*", "prefixes": ["enc.b."], "granularity": "batch"},
    {"tenant": "*", "prefixes": ["enc."]},
]


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


def table(results: dict[str, Any], filter_cpu: dict[str, Any]) -> str:
    lines = [
        f"{'size':>6} {'granularity':<11} {'phase':<8} {'plain MB/s':>10} {'enc MB/s':>9}"
        f" {'ratio':>6} {'plain CPU-s/GB':>14} {'enc CPU-s/GB':>12} {'filter':>7}"
        "  target >= 0.7"
    ]
    for size, runs in results.items():
        plain = runs["plain"]
        for granularity in GRANULARITIES:
            enc, r = runs[granularity], runs["ratios"][granularity]
            for phase in ("produce", "consume"):
                ratio = r[f"{phase}_throughput"]
                own = filter_cpu.get(size, {}).get(granularity, {}).get(phase, float("nan"))
                lines.append(
                    f"{size:>6} {granularity:<11} {phase:<8} {plain[f'{phase}_mb_per_s']:>10.2f}"
                    f" {enc[f'{phase}_mb_per_s']:>9.2f} {ratio:>6.2f}"
                    f" {plain[f'{phase}_cpu_s_per_gb']:>14.2f}"
                    f" {enc[f'{phase}_cpu_s_per_gb']:>12.2f} {own:>7.2f}"
                    f"  {'met' if ratio >= 0.7 else 'NOT met'}"
                )
    lines.append("filter: the encryption filter's own CPU-s/GB, in process (records functions)")
    return "\n".join(lines)


def filter_cpu(root: Path, megabytes: int) -> dict[str, Any]:
    """CPU-seconds per GB of the filter's produce and fetch work alone, in process, for
    each size and granularity: batches of 16 KiB (ProducerPerformance's batch.size),
    the development file key manager (one DEK: key manager calls are not measured)."""
    from gateway.encryption.batch import Batch, Record, encode
    from gateway.encryption.deks import DekCache
    from gateway.encryption.policy import Rule
    from gateway.encryption.records import decrypt_records, encrypt_records
    from gateway.encryption.settings import DekConfig
    from gateway.kms.filekms import FileKms

    kms = FileKms(root / "bench-keks.json")
    kms.create("bench")
    deks = DekCache(kms, DekConfig())
    out: dict[str, Any] = {}
    for size in SIZES:
        per_batch = max(1, 16384 // (size + 10))
        recs = [Record(i, i, None, os.urandom(size)) for i in range(per_batch)]
        clear = encode(Batch(0, 0, 0, per_batch - 1, 1000, 1000 + per_batch, -1, -1, -1, recs))
        batches = max(1, megabytes * 1_000_000 // (size * per_batch))
        gigabytes = batches * per_batch * size / 1e9
        out[str(size)] = {}
        for granularity in GRANULARITIES:
            rule = Rule("bench", False, False, batch=granularity == "batch")
            sealed = encrypt_records(clear, "enc.bench", rule, deks)
            decrypt_records(sealed, "enc.bench", deks)  # the DEK unwrapped once
            start = time.process_time()
            for _ in range(batches):
                encrypt_records(clear, "enc.bench", rule, deks)
            middle = time.process_time()
            for _ in range(batches):
                decrypt_records(sealed, "enc.bench", deks)
            end = time.process_time()
            out[str(size)][granularity] = {
                "produce": (middle - start) / gigabytes,
                "consume": (end - middle) / gigabytes,
            }
            say(f"in process, {size} B, {granularity}: {out[str(size)][granularity]}")
    return out


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
        for size, records, granularity in (
            (s, r, g) for s, r in sizes.items() for g in GRANULARITIES
        ):
            topic = f"{GRANULARITIES[granularity]}bench-profile-{size}-{int(time.time())}"
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
                path = RESULTS / f"encryption-profile-{stamp}-{size}-{granularity}-{phase}.txt"
                head = (
                    f"{records} records of {size} B, granularity {granularity}, {phase};"
                    f" profile window: {window}\n"
                )
                path.write_text(head + "\n" + top_functions(prefix, index, "cprofile"))
                files[f"{size}-{granularity}-{phase}"] = str(path)
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
                "policies": POLICIES,
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
            runs: dict[str, Any] = {"ratios": {}}
            for run, via, prefix in (
                ("plain", "plain", "enc."),
                *((g, "encrypting", p) for g, p in GRANULARITIES.items()),
            ):
                topic = f"{prefix}bench-{run}-{size}-{int(time.time())}"
                future = admin.create_topics([NewTopic(topic, PARTITIONS, min(3, a.nodes))])
                future[topic].result(60)
                say(f"{size} B records through {via} ({run}): {records} records")
                runs[run] = run_one(cluster, gateways[via], topic, records, size)
            for granularity in GRANULARITIES:
                runs["ratios"][granularity] = ratios(runs["plain"], runs[granularity])
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
    own = filter_cpu(root, megabytes)
    elapsed = time.monotonic() - started
    say("\n" + table(results, own))
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
        "granularities": {"record": "wire format 1", "batch": "wire format 2"},
        "results": results,
        "filter_cpu_s_per_gb": own,
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
