"""What the access log costs: the gateway with access logging off versus on, in one run.

``python -m bench.accesslog [--quick] [--records N] [--rounds N]`` starts a fresh
3-node Kafka cluster and two gateways in front of it, identical but for the
``accesslog`` section: ``off`` has none, ``on`` writes every record to a rotating
file (the default sink). Each round runs, alternating which gateway goes first:
produce at full rate (throughput and p99), consume, and produce at half the ``off``
full rate (p99 under a steady load). It prints medians and the on/off ratios and
writes ``bench/results/accesslog-<stamp>.json`` (``settings.mode`` says whether it
was a ``--quick`` run). The record count in the ``on`` gateway's access log is checked, so a
run where logging did not happen is not reported as free.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/accesslog.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report, sysinfo
from bench.run import NODES, REPO, RESULTS, Bench, Settings, say
from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster

TARGETS = ("off", "on")
METRICS = (  # phase, metric, what a higher on/off ratio means
    ("produce", "records_per_s", "better"),
    ("produce", "p99_ms", "worse"),
    ("consume", "fetch_records_per_s", "better"),
    ("half", "p99_ms", "worse"),
)


def parse_args(argv: list[str] | None) -> tuple[Settings, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m bench.accesslog", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--records", type=int, help="records per full-rate produce run")
    parser.add_argument("--rounds", type=int, help="off/on pairs (default 3, quick 1)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    opts = parser.parse_args(argv)
    records = opts.records or (30_000 if opts.quick else 400_000)
    settings = Settings(
        mode="quick" if opts.quick else "full",
        records=records,
        half_records=max(records // 2, 1000),
        consume_records=records,
        warmup_records=min(records // 4, 100_000),
        record_size=opts.record_size,
        batch_size=16384,
        linger_ms=5,
        rounds=opts.rounds or (1 if opts.quick else 3),
        consume_timeout_ms=30_000,
        profile=False,
        profiler=None,
    )
    return settings, opts


class AccessLogBench(Bench):
    """``self.gateway`` is the ``off`` gateway; ``self.logged`` the ``on`` one."""

    def __init__(self, settings: Settings, workdir: Path) -> None:
        super().__init__(settings, workdir)
        self.logged: GatewayProcess | None = None
        self.log_path = workdir / "gateway-on" / "access" / "access.log"

    def start(self) -> None:
        say(f"starting a {NODES}-node Kafka {kafka_dist.KAFKA_VERSION} cluster in {self.workdir}")
        self.cluster = KafkaCluster(self.workdir / "kafka", nodes=NODES)
        self.cluster.start()
        self.gateway = self._new_gateway("gateway-off", GatewayProcess)
        section = {"path": str(self.log_path), "max_bytes": 256 * 1024 * 1024, "max_files": 4}
        self.logged = self._new_gateway(
            "gateway-on", lambda d, c: GatewayProcess(d, {**c, "accesslog": section})
        )
        say(f"gateways: off {self.gateway.bootstrap}, on {self.logged.bootstrap} -> {section}")

    def close(self) -> None:
        if self.logged is not None:
            self.logged.stop()
        super().close()

    def _gw(self, target: str) -> GatewayProcess:
        gateway = self.logged if target == "on" else self.gateway
        assert gateway is not None
        return gateway

    def logged_records(self) -> int:
        return count_records(self.log_path)

    def measure(self) -> None:
        s = self.s
        rounds = range(1, s.rounds + 1)
        produce = {(r, t): f"bench-al-produce-{t}-{r}" for r in rounds for t in TARGETS}
        half = {(r, t): f"bench-al-half-{t}-{r}" for r in rounds for t in TARGETS}
        warmup = {t: f"bench-al-warmup-{t}" for t in TARGETS}
        self.create_topics([*warmup.values(), *produce.values(), *half.values()])
        say(f"warm-up: {s.warmup_records} records each way through each gateway (not counted)")
        for t in TARGETS:
            self.produce("warmup", 0, t, warmup[t], s.warmup_records, gateway=self._gw(t))
            self.consume("warmup", 0, t, warmup[t], gateway=self._gw(t), records=s.warmup_records)
        for r in rounds:
            order = TARGETS if r % 2 else TARGETS[::-1]  # alternate who goes first
            say(f"round {r}: full-rate produce {s.records} x {s.record_size} B, then consume")
            for t in order:
                self.produce("produce", r, t, produce[(r, t)], s.records, gateway=self._gw(t))
            for t in order:
                self.consume("consume", r, t, produce[(r, t)], gateway=self._gw(t))
        rate = max(int(report.medians(self.runs)["produce"]["off"]["records_per_s"] / 2), 1)
        say(f"produce at half the off full rate: {rate} records/s, {s.half_records} records")
        for r in rounds:
            order = TARGETS if r % 2 else TARGETS[::-1]
            for t in order:
                self.produce("half", r, t, half[(r, t)], s.half_records, rate, gateway=self._gw(t))


def count_records(log_path: Path) -> int:
    """Lines in an access log and its rotated files (``access.log``, ``access.log.1``, …)."""
    files = sorted(log_path.parent.glob(log_path.name + "*"))
    return sum(1 for path in files for _ in path.open("rb"))


def on_off_ratios(meds: dict[str, dict[str, dict[str, float]]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for phase, key, _ in METRICS:
        row = meds.get(phase, {})
        off, on = row.get("off", {}).get(key), row.get("on", {}).get(key)
        out[f"{phase}.{key}"] = round(on / off, 3) if on is not None and off else None
    return out


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    settings, opts = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.time()
    machine = sysinfo.machine_info(REPO, kafka_dist.java_executable(), kafka_dist.KAFKA_VERSION)
    say(f"machine: {machine['nproc']} CPUs, load average {machine['loadavg_start']}")
    workdir = Path(tempfile.mkdtemp(prefix="kgw-bench-accesslog-"))
    bench = AccessLogBench(settings, workdir)
    failed, logged = False, 0
    try:
        bench.start()
        bench.measure()
        time.sleep(2.0)  # the writer runs off the data path: let it catch up
        logged = bench.logged_records()
        if logged == 0:
            raise RuntimeError("the on gateway wrote no access-log records")
    except BaseException as exc:
        failed = True
        say(f"benchmark failed: {exc}")
        if not isinstance(exc, Exception):
            raise
    finally:
        bench.close()
        if not opts.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    meds = report.medians(bench.runs)
    ratios = on_off_ratios(meds)
    doc: dict[str, Any] = {
        "benchmark": "accesslog",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "settings": settings.__dict__,
        "machine": machine,
        "access_log_records": logged,
        "medians": meds,
        "ratios_on_over_off": ratios,
        "runs": bench.runs,
        "complete": not failed,
    }
    say("\nmedians (off | on):")
    for phase, key, _ in METRICS:
        row = meds.get(phase, {})
        values = " | ".join(f"{row.get(t, {}).get(key, float('nan')):,.1f}" for t in TARGETS)
        say(f"  {phase:<8} {key:<20} {values}")
    say("on/off ratios:")
    for phase, key, meaning in METRICS:
        value = ratios[f"{phase}.{key}"]
        shown = "n/a" if value is None else f"{value:.3f}"
        say(f"  {phase + '.' + key:<30} {shown}  (higher is {meaning})")
    say(f"access-log records written by the on gateway: {logged:,}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = bench.stamp
    prefix = "failed-" if failed else ""  # quick or full: settings.mode in the file
    path = RESULTS / f"accesslog-{prefix}{stamp}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    say(f"results: {path.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
