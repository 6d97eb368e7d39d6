"""``kgw analyze`` (and ``convert``), ``kgw simulate``: mining access logs with Spark.

``kgw analyze --logs DIR --out DIR`` finds anomalies and writes findings.json,
findings.parquet/, summary.json and report.html; ``--evaluate LABELS`` prints each
detector's precision and recall against a simulation's labels. ``kgw analyze --follow
--follow-config FILE`` runs the same detectors near real time on the access-log topic,
with alerts and an opt-in response (docs/analytics.md). ``kgw analyze
convert --in DIR --out DIR`` turns JSON-lines logs into Parquet. ``kgw simulate``
writes realistic logs with labelled attacks. Exit codes: 0 done, 2 bad usage,
unreadable input or no Spark.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..analytics.spark import DEFAULT_MASTER, Progress, SparkUnavailable

OK, USAGE = 0, 2


def _spark(
    args: argparse.Namespace, app: str, write_archive: bool = False
) -> AbstractContextManager[Any]:
    from ..analytics.spark import running

    return running(args.master, app, args.driver_memory, write_archive=write_archive)


def cmd_analyze(args: argparse.Namespace) -> int:
    if getattr(args, "analyze_command", None) == "convert":
        return cmd_convert(args)
    if args.follow:
        return cmd_follow(args)
    if not args.logs:
        raise _Usage("kgw analyze needs --logs DIR (or: kgw analyze convert --in DIR --out DIR)")
    from ..analytics.job import STAGES, AnalyzeOptions, analyze, write_outputs

    progress = Progress("analyze", STAGES + 1, quiet=args.quiet)
    progress.say(f"starting Spark ({args.master})")
    options = AnalyzeOptions(
        logs=tuple(args.logs),
        out=Path(args.out),
        fmt=args.format,
        detect_hours=args.detect_hours,
        report=not args.no_report,
    )
    with _spark(args, "kgw-analyze", write_archive=True) as spark:
        result = analyze(spark, options, progress)
        progress.stage("writing findings and the report")
        paths = write_outputs(result, options)
        progress.finish()
    print(
        f"{len(result.findings)} findings in {result.records:,} records "
        f"({result.records / max(result.seconds, 1e-9):,.0f} records/s)"
    )
    for finding in result.findings[: args.show]:
        print(f"  [{finding.severity:<8}] {finding.detector:<28} {finding.summary}")
    if len(result.findings) > args.show:
        print(f"  … and {len(result.findings) - args.show} more")
    for name, path in paths.items():
        print(f"{name}: {path}")
    if args.evaluate:
        _evaluate(result.findings, Path(args.evaluate), Path(args.out))
    return OK


def cmd_follow(args: argparse.Namespace) -> int:
    """``kgw analyze --follow --follow-config FILE``: the detectors on the access-log topic."""
    from ..analytics.follow import follow
    from ..analytics.kafka_source import SourceUnavailable, ensure_source, source_note
    from ..analytics.settings import SettingsError, load_follow
    from ..analytics.spark import session, stop

    if not args.follow_config:
        raise _Usage("kgw analyze --follow needs --follow-config FILE (docs/analytics.md)")
    try:
        config = load_follow(Path(args.follow_config))
        jars = ensure_source()
    except (SettingsError, SourceUnavailable) as exc:
        raise _Usage(str(exc)) from None
    note = source_note(jars)
    if note:
        print(f"kgw analyze --follow: {note}", file=sys.stderr, flush=True)
    conf = {"spark.jars": ",".join(str(j) for j in jars)}
    spark = session(args.master, "kgw-follow", args.driver_memory, conf=conf)
    try:
        batches = follow(spark, config, run_for_s=args.run_for, quiet=args.quiet)
    finally:
        stop(spark)
    print(f"followed {config.source.topic}: {batches} micro-batches; findings in {config.out}")
    return OK


def _evaluate(findings: list[Any], labels_path: Path, out: Path) -> None:
    from ..analytics.evaluate import evaluate, format_table, overall, unmatched
    from ..analytics.labels import read_labels

    try:
        labels = read_labels(labels_path)
    except (OSError, ValueError, KeyError) as exc:
        raise _Usage(f"cannot read labels {labels_path}: {exc}") from None
    scores = evaluate(findings, labels)
    total = overall(findings, labels)
    print(f"\nevaluation against {labels_path} ({len(labels)} labels):")
    print(format_table([*scores, total]))
    false_positives, missed = unmatched(findings, labels)
    (out / "evaluation.json").write_text(
        json.dumps(
            {
                "labels": str(labels_path),
                "scores": [s.to_json() for s in scores],
                "overall": total.to_json(),
                "false_positives": [f.to_json() for f in false_positives],
                "missed": [label.to_json() for label in missed],
            },
            indent=1,
        )
        + "\n"
    )
    print(f"evaluation: {out / 'evaluation.json'}")


def cmd_convert(args: argparse.Namespace) -> int:
    from ..analytics.load import convert

    if not args.inputs or not args.out:
        raise _Usage("kgw analyze convert needs --in DIR and --out DIR")
    progress = Progress("convert", 2, quiet=args.quiet)
    progress.stage(f"starting Spark ({args.master})")
    with _spark(args, "kgw-convert") as spark:
        progress.stage(f"converting {', '.join(args.inputs)} to Parquet in {args.out}")
        written, skipped = convert(spark, args.inputs, args.out, args.format)
        progress.finish()
    print(
        f"wrote {written:,} records to {args.out} (partitioned by day)"
        + (f"; skipped {skipped:,} unreadable lines" if skipped else "")
    )
    return OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..analytics.simulate import SimulationOptions, write_simulation

    options = SimulationOptions(
        tenants=args.tenants,
        principals=args.principals,
        hours=args.hours,
        seed=args.seed,
        attacks=args.attacks,
        attack_hours=args.attack_hours,
        start=args.start,
        traps=not args.no_traps,
    )
    out = Path(args.out)
    if args.records:
        from ..analytics.bulk import write_bulk

        progress = Progress("simulate", 4, quiet=args.quiet)
        with _spark(args, "kgw-simulate") as spark:
            bulk = write_bulk(spark, out, options, args.records, progress)
            progress.finish()
        print(
            f"wrote {bulk.records:,} records as Parquet to {bulk.parquet_dir} "
            f"({bulk.replicas} replicas of a {bulk.base_records:,}-record scenario) "
            f"in {bulk.seconds:.1f}s; {len(bulk.labels)} labels in {bulk.labels_path}"
        )
        return OK
    try:
        result = write_simulation(out, options)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    principals = len(result.scenario.principals)
    print(
        f"wrote {result.records:,} records for {len(result.scenario.tenants)} tenants and "
        f"{principals} principals to {result.log_dir} in {result.seconds:.1f}s"
    )
    print(
        f"{len(result.labels)} labels ({args.attacks} attacks of each kind) in {result.labels_path}"
    )
    return OK


class _Usage(Exception):
    pass


def _run(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from ..analytics.load import LogInputError

        try:
            return command(args)
        except (_Usage, SparkUnavailable, LogInputError) as exc:
            print(f"kgw: {exc}", file=sys.stderr)
            return USAGE

    return run


def _spark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        default=DEFAULT_MASTER,
        help=f"Spark master (default {DEFAULT_MASTER}; spark://host:7077, yarn, …)",
    )
    p.add_argument("--driver-memory", default="3g", help="Spark driver memory (default 3g)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def register(commands: Any) -> None:
    analyze = commands.add_parser(
        "analyze", help="find anomalies in access logs with Spark (JSON lines or Parquet)"
    )
    analyze.add_argument(
        "--logs",
        action="append",
        metavar="PATH",
        help="a directory or file of access logs (repeat for more)",
    )
    analyze.add_argument("--format", choices=("auto", "json", "parquet"), default="auto")
    analyze.add_argument("--out", default="analysis", help="output directory (default analysis)")
    analyze.add_argument(
        "--detect-hours",
        type=float,
        default=24.0,
        help="report on the last H hours; the time before is the baseline",
    )
    analyze.add_argument(
        "--evaluate",
        metavar="LABELS",
        help="labels.json from kgw simulate: print precision and recall",
    )
    analyze.add_argument("--show", type=int, default=10, help="findings to print (default 10)")
    analyze.add_argument("--no-report", action="store_true", help="skip report.html")
    analyze.add_argument(
        "--follow",
        action="store_true",
        help="near real time: follow the access-log topic (needs --follow-config)",
    )
    analyze.add_argument("--follow-config", metavar="FILE", help="YAML: source, alerts, response")
    analyze.add_argument(
        "--run-for", type=float, metavar="SECONDS", help="with --follow: stop after this long"
    )
    _spark_args(analyze)
    analyze.set_defaults(func=_run(cmd_analyze))
    sub = analyze.add_subparsers(dest="analyze_command")
    convert = sub.add_parser("convert", help="convert JSON-lines logs to Parquet")
    convert.add_argument("--in", dest="inputs", action="append", metavar="PATH", required=True)
    convert.add_argument("--out", required=True, help="the Parquet directory")
    convert.add_argument("--format", choices=("auto", "json", "parquet"), default="auto")
    _spark_args(convert)
    convert.set_defaults(func=_run(cmd_convert))

    simulate = commands.add_parser(
        "simulate", help="write simulated access logs with labelled attacks"
    )
    simulate.add_argument("--out", required=True, help="output directory")
    simulate.add_argument("--tenants", type=int, default=8)
    simulate.add_argument("--principals", type=int, default=8, help="principals per tenant")
    simulate.add_argument("--hours", type=int, default=72)
    simulate.add_argument("--seed", type=int, default=7)
    simulate.add_argument("--attacks", type=int, default=3, help="attacks of each kind")
    simulate.add_argument(
        "--attack-hours",
        type=int,
        default=24,
        help="attacks fall in the last H hours (kgw analyze --detect-hours)",
    )
    simulate.add_argument("--start", default="2026-11-02T00:00:00Z", help="RFC 3339 start")
    simulate.add_argument(
        "--no-traps",
        action="store_true",
        help="leave out the benign traps (sale day, new topic, key rotation, address move, "
        "routine administration)",
    )
    simulate.add_argument(
        "--records", type=int, help="bulk mode: this many records as Parquet, written by Spark"
    )
    _spark_args(simulate)
    simulate.set_defaults(func=_run(cmd_simulate))
