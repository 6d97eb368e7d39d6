"""``kgw analyze`` on 10 million simulated records from Parquet, in local mode.

``python -m bench.analyze [--quick] [--records N] [--master local[2]] [--runs 5] [--reuse DIR]``
writes the records with ``kgw simulate --records N`` (bulk mode: Spark replicates a
labelled scenario straight to Parquet), then times ``kgw analyze`` on them as a
separate process, as a user would run it, ``--runs`` times, and reports the median
run: records per second end to end (Python and Spark start-up included) and for the
job alone (from ``summary.json``), each detector's precision and recall at that
size, and how busy the machine was (a shared machine slows every figure). The first
analysis on a machine writes the driver JVM's class-data archive
(``gateway/analytics/jvm.py``); when there is none yet, a first run writes it and is
reported apart, since every later run maps it. Results:
``bench/results/analyze-latest.json`` and a timestamped copy. Target: 500,000
records/s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TARGET = 500_000
RESULTS = Path(__file__).resolve().parent / "results"


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs since boot; iowait counts as idle."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle, sum(values[:8])


def timed(argv: list[str]) -> dict[str, Any]:
    """Run ``argv``; wall time, the machine's busy share and load around it."""
    load_before = os.getloadavg()[0]
    busy0, total0 = machine_ticks()
    began = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    busy1, total1 = machine_ticks()
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"bench: {' '.join(argv[2:4])} failed ({result.returncode})")
    return {
        "wall_s": round(wall, 2),
        "machine_busy_pct": round(100 * (busy1 - busy0) / max(total1 - total0, 1), 1),
        "load1_before": round(load_before, 2),
        "load1_after": round(os.getloadavg()[0], 2),
        "stdout": result.stdout,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--reuse", type=Path, help="a directory from an earlier run: skip generating"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated records")
    parser.add_argument("--runs", type=int, default=5, help="timed runs; the median is reported")
    parser.add_argument(
        "--quick", action="store_true", help="1,000,000 records, one run: a smoke run"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.runs = 1_000_000, 1

    kgw = [sys.executable, "-m", "gateway"]
    work = args.reuse or Path(tempfile.mkdtemp(prefix="kgw-bench-analyze-"))
    try:
        generate: dict[str, Any] | None = None
        if args.reuse is None:
            print(f"bench: simulating {args.records:,} records (bulk mode) in {work}", flush=True)
            generate = timed(
                [
                    *kgw,
                    "simulate",
                    "--out",
                    str(work),
                    "--records",
                    str(args.records),
                    "--master",
                    args.master,
                    "--quiet",
                ]
            )
            print(f"bench: generated in {generate['wall_s']}s", flush=True)
        from gateway.analytics.evaluate import evaluate
        from gateway.analytics.findings import read_findings_json
        from gateway.analytics.jvm import archive_path
        from gateway.analytics.labels import read_labels

        argv = [*kgw, "analyze", "--logs", str(work / "parquet"), "--master", args.master]
        argv += ["--quiet"]  # precision and recall are checked here, outside the timing
        archive = archive_path()
        first_run: dict[str, Any] | None = None
        if archive is not None and not archive.exists():
            print(f"bench: first analysis here writes the JVM archive {archive}", flush=True)
            first_run = timed([*argv, "--out", str(work / "analysis-first")])
            print(f"bench: first run {first_run['wall_s']}s (archive written)", flush=True)
        print(f"bench: kgw analyze --logs {work / 'parquet'} --master {args.master}", flush=True)
        runs = []
        for number in range(max(1, args.runs)):
            runs.append(timed([*argv, "--out", str(work / f"analysis-{number}")]))
            print(f"bench: run {number + 1}: {runs[-1]['wall_s']}s", flush=True)
        median = sorted(range(len(runs)), key=lambda i: runs[i]["wall_s"])[len(runs) // 2]
        run = runs[median]
        analysis = work / f"analysis-{median}"
        summary = json.loads((analysis / "summary.json").read_text())
        scores = evaluate(
            read_findings_json(analysis / "findings.json"), read_labels(work / "labels.json")
        )
        records = int(summary["records"])
        end_to_end = records / run["wall_s"]
        job = records / summary["seconds"]
        report = {
            "benchmark": "kgw analyze, Parquet input, local mode",
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "master": args.master,
            "cores": os.cpu_count(),
            "records": records,
            "findings": sum(summary["counts"].values()),
            "generate": {k: v for k, v in (generate or {}).items() if k != "stdout"} or None,
            "analyze": {k: v for k, v in run.items() if k != "stdout"},
            "runs_wall_s": [r["wall_s"] for r in runs],
            "first_run_writing_jvm_archive": (
                {k: v for k, v in first_run.items() if k != "stdout"} if first_run else None
            ),
            "job_seconds": summary["seconds"],
            "stage_seconds": summary["stage_seconds"],
            "records_per_second_end_to_end": round(end_to_end),
            "records_per_second_job": round(job),
            "target_records_per_second": TARGET,
            "meets_target_end_to_end": end_to_end >= TARGET,
            "meets_target_job": job >= TARGET,
            "detectors": {
                s["detector"]: {
                    "precision": s["precision"],
                    "recall": s["recall"],
                    "labels": s["labels"],
                    "findings": s["findings"],
                }
                for s in (score.to_json() for score in scores)
            },
        }
    finally:
        if args.reuse is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    stamp = report["when"].replace("-", "").replace(":", "")
    for name in ("analyze-latest.json", f"analyze-{stamp}.json"):
        (RESULTS / name).write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"bench: {records:,} records; median of {len(runs)} runs end to end {run['wall_s']}s = "
        f"{end_to_end:,.0f} records/s "
        f"(Spark start-up included); job {summary['seconds']}s = {job:,.0f} records/s; "
        f"target {TARGET:,}/s; machine {run['machine_busy_pct']}% busy, "
        f"load {run['load1_before']} -> {run['load1_after']}"
    )
    worst = min(report["detectors"].values(), key=lambda d: (d["recall"], d["precision"]))
    print(
        f"bench: worst detector at this size: precision {worst['precision']}, "
        f"recall {worst['recall']}; results in {RESULTS / 'analyze-latest.json'}"
    )
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
