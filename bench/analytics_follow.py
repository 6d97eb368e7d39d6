"""``kgw analyze --follow`` at a sustained rate: does streaming keep up, how late are findings?

``python -m bench.analytics_follow [--quick] [--rate 60000] [--seconds 120]``
starts a one-broker Kafka cluster on loopback, runs ``kgw analyze --follow`` as a
child process (local[2], 10 s trigger, incremental: each micro-batch's rollups merged
into the state in its checkpoint), and produces access-log records in the topic's
schema (requests of 200 principals of 10 tenants, current timestamps) at ``--rate``
records/s from another child process for ``--seconds``. Every 30 s a brute force (15
failed logins from an address of its own against one key) is produced, so findings
arrive all along. Printed: the rate produced, the records the follower ingested, the
rate it sustained (records over the time from the first record produced to the
micro-batch that held the last one), how long after the last record it caught up,
the lag of each finding behind its last event (emitted minus the finding's end) and
of each brute force behind its last failed login, and the CPU seconds of the follower,
the producer and the whole machine (from /proc; a shared machine slows every figure).
``--quick``: 20,000 records/s for 40 s, a smoke run. Target (issue 17): >= 50,000
records/s with findings <= 60 s after their events. Results:
``bench/results/analytics-follow-<stamp>.json`` and ``-latest.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .analyze import machine_ticks

TARGET_RATE = 50_000
TARGET_LATENCY_S = 60.0
RESULTS = Path(__file__).resolve().parent / "results"
ATTACK_EVERY_S = 30.0
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / TICK


def _tree_cpu(pid: int) -> float:
    total = _cpu_seconds(pid)
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for kid in child.read_text().split():
            total += _tree_cpu(int(kid))
    return total


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def attacker(n: int) -> str:
    return f"10.66.{n // 250}.{n % 250 + 1}"


def produce(bootstrap: str, topic: str, rate: int, seconds: float, marks: Any) -> None:
    """Records at ``rate``/s for ``seconds`` (paced every 50 ms); a brute force every
    :data:`ATTACK_EVERY_S` (its last failure's time in ``marks["attacks"]``)."""
    from confluent_kafka import Producer

    from gateway.analytics.records import connection_record, request_record, rfc3339_ms

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "batch.num.messages": 10000, "queue.buffering.max.messages": 2_000_000,
                         "compression.type": "lz4"})  # fmt: skip
    stamp_of_zero = '"1970-01-01T00:00:00.000Z"'
    halves = []
    for n in range(200):
        record = request_record(
            0, instance="gw-1", conn=f"c{n}", host=f"10.{n % 10}.0.{n}", port=40000 + n,
            principal=f"User:t{n % 10}.app{n}", tenant=f"t{n % 10}", mechanism="PLAIN",
            api_key_id=None, client_id=f"app{n}", api="produce", correlation_id=n,
            topics=[f"t{n % 10}.orders"], groups=[], decision="allow", bytes_in=900,
            bytes_out=80, records=3, throttle_ms=0, latency_ms=1.5,
        )  # fmt: skip
        before, after = json.dumps(record).encode().split(stamp_of_zero.encode())
        halves.append((before + b'"', b'"' + after))
    began = time.time()
    marks["first"] = began
    sent = 0
    step = 0.05
    attacks: list[tuple[str, float]] = []
    send = producer.produce
    while (now := time.time()) < began + seconds:
        due = int((now - began + step) * rate)
        stamp = rfc3339_ms(int(now * 1000)).encode()
        while sent < due:
            before, after = halves[sent % 200]
            send(topic, before + stamp + after)
            sent += 1
            if sent % 20_000 == 0:
                producer.poll(0)
        if now >= began + (len(attacks) + 0.5) * ATTACK_EVERY_S:
            host = attacker(len(attacks))
            for i in range(15):
                failed = connection_record(
                    int(time.time() * 1000), "auth", instance="gw-1", conn=f"x{i}",
                    host=host, port=50000 + i, principal="User:ANONYMOUS",
                    mechanism="PLAIN", outcome="failure", reason="wrong_secret",
                )  # fmt: skip
                failed["claimed"] = failed["api_key_id"] = f"key-victim{len(attacks)}"
                send(topic, json.dumps(failed).encode())
                sent += 1
            attacks.append((host, time.time()))
        producer.poll(0)
        time.sleep(max(0.0, began + (int((time.time() - began) / step) + 1) * step - time.time()))
    producer.flush(120)
    marks["last"] = time.time()
    marks["sent"] = sent
    marks["attacks"] = attacks
    marks["producer_cpu"] = _cpu_seconds(os.getpid())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000/s for 40 s: a smoke run")
    parser.add_argument("--rate", type=int, default=60_000)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--trigger", type=float, default=10)
    args = parser.parse_args()
    if args.quick:
        args.rate, args.seconds = 20_000, 40.0

    from confluent_kafka.admin import AdminClient, NewTopic

    from gateway.devstack.kafka_cluster import KafkaCluster

    work = Path(tempfile.mkdtemp(prefix="kgw-bench-follow-"))
    cluster = KafkaCluster(work / "kafka", nodes=1)
    cluster.start(timeout=600)  # a busy machine starts a broker slowly
    follower = None
    try:
        topic = "kgw.access"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(60)
        config = work / "follow.yaml"
        config.write_text(json.dumps({
            "source": {"bootstrap_servers": cluster.bootstrap_servers, "topic": topic},
            "checkpoint_dir": str(work / "checkpoint"), "out": str(work / "out"),
            "trigger_s": args.trigger, "retain_hours": 2, "detect_hours": 1,
        }))  # fmt: skip
        log = work / "follow.log"
        with log.open("w") as out:
            follower = subprocess.Popen(
                [sys.executable, "-m", "gateway", "analyze", "--follow", "--follow-config",
                 str(config)], stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        # the query is running once Spark has planned its first offsets
        while not (work / "checkpoint" / "spark" / "offsets").exists():
            if follower.poll() is not None:
                raise RuntimeError(f"the follower exited: {log.read_text()[-3000:]}")
            time.sleep(0.5)
        busy0, total0 = machine_ticks()
        load_start = os.getloadavg()
        marks = multiprocessing.Manager().dict()
        producer = multiprocessing.Process(
            target=produce, args=(cluster.bootstrap_servers, topic, args.rate, args.seconds, marks)
        )
        producer.start()
        producer.join()
        producer_cpu = float(marks["producer_cpu"])
        sent = int(marks["sent"])
        deadline = time.time() + 600
        ingested, last_batch_at = 0, None
        batches = []
        while time.time() < deadline:
            batches = [
                (int(m.group(1)), float(m.group(2)))
                for m in re.finditer(r"batch \d+: (\d+) records, .*?, ([\d.]+)s", log.read_text())
            ]
            ingested = sum(b[0] for b in batches)
            if ingested >= sent:
                last_batch_at = time.time()
                break
            time.sleep(0.5)
        emitted = work / "out" / "findings.jsonl"
        found = [
            json.loads(x) for x in (emitted.read_text().splitlines() if emitted.exists() else [])
        ]
        lags = [
            {"detector": f["detector"], "entity": f["entity"], "lag_s": f["lag_s"]} for f in found
        ]
        attack_lags: list[float | None] = []
        for host, last_failure in marks["attacks"]:
            mine = [_epoch(f["emitted"]) for f in found if f["entity"] == host]
            attack_lags.append(round(min(mine) - last_failure, 1) if mine else None)
        worst = max((x["lag_s"] for x in lags), default=None)
        busy1, total1 = machine_ticks()
        follower_cpu = _tree_cpu(follower.pid)
        result: dict[str, Any] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "rate_asked": args.rate,
            "seconds": args.seconds,
            "produced": sent,
            "produced_per_s": round(sent / (marks["last"] - marks["first"])),
            "ingested": ingested,
            "micro_batches": len(batches),
            "batch_seconds_max": max((b[1] for b in batches), default=None),
            "sustained_per_s": round(ingested / (last_batch_at - marks["first"]))
            if last_batch_at
            else None,
            "caught_up_s_after_last_record": round(last_batch_at - marks["last"], 1)
            if last_batch_at
            else None,
            "findings": len(found),
            "finding_lag_s_max": worst,
            "brute_forces": len(attack_lags),
            "brute_force_lag_s": attack_lags,
            "finding_lags": lags,
            "follower_cpu_s": round(follower_cpu, 1),
            "producer_cpu_s": round(producer_cpu, 1),
            "machine_busy_share": round((busy1 - busy0) / max(1, total1 - total0), 3),
            "cpus": os.cpu_count(),
            "load_average_start": [round(x, 2) for x in load_start],
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
        }
        result["meets_target"] = bool(
            result["sustained_per_s"] and result["sustained_per_s"] >= TARGET_RATE
            and attack_lags and all(x is not None and x <= TARGET_LATENCY_S for x in attack_lags)
            and worst is not None and worst <= TARGET_LATENCY_S
        )  # fmt: skip
        if args.quick:
            result["quick"] = "smoke run (--quick): below the target rate by design"
        print(json.dumps({k: v for k, v in result.items() if k != "finding_lags"}, indent=1))
        for lag in lags:
            print(f"  finding {lag['detector']:<28} {lag['entity']:<22} {lag['lag_s']:7.1f} s "
                  "after its last event")  # fmt: skip
        print(
            f"sustained {result['sustained_per_s']} records/s (target {TARGET_RATE:,}); "
            f"findings at most {worst} s after their events (target {TARGET_LATENCY_S:.0f} s)"
        )
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        for name in ("analytics-follow-latest.json", f"analytics-follow-{stamp}.json"):
            (RESULTS / name).write_text(json.dumps(result, indent=1) + "\n")
        return 0 if result["meets_target"] or args.quick else 1
    finally:
        if follower is not None and follower.poll() is None:
            follower.terminate()
            follower.wait(120)
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
