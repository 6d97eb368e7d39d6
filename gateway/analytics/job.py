"""``kgw analyze``: the Spark job that reads access logs and writes findings.

Stages: roll the records up in Spark per principal, tenant, hour and address (the
bounds of the data come with it), per principal, hour and topic, and keep the failed
logins and throttled requests (three passes at once, collected as Arrow tables), run
the detectors, then write ``findings.json``, ``findings.parquet/``, ``summary.json`` and
``report.html`` under ``--out``. Each stage logs a progress line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from . import flags, kinds, rollups
from .detect import run
from .detect.context import Thresholds
from .detect.rows import HourRow, Single
from .findings import Finding, rank, write_findings_json, write_findings_parquet
from .load import LogInputError, detect_format, read_logs
from .records import rfc3339_ms
from .spark import FIRST, LATER, Progress, in_pool

HOUR = 3600
STAGES = 6


@dataclass(frozen=True, slots=True)
class AnalyzeOptions:
    logs: tuple[str, ...]
    out: Path
    fmt: str = "auto"
    detect_hours: float = 24.0  # the last hours are judged against the time before them
    thresholds: Thresholds = field(default_factory=Thresholds)
    timelines: int = 12  # principals with a timeline in the report
    report: bool = True


@dataclass(slots=True)
class AnalysisResult:
    findings: list[Finding]
    records: int
    skipped: int
    data_start: int
    data_end: int
    detect_from: int
    seconds: float
    timings: dict[str, float]
    timelines: dict[str, list[dict[str, int]]]

    def meta(self) -> dict[str, Any]:
        counts = {name: 0 for name in kinds.DETECTORS}
        for finding in self.findings:
            counts[finding.detector] += 1
        return {
            "generated": rfc3339_ms(int(time.time() * 1000)),
            "records": self.records,
            "skipped_lines": self.skipped,
            "data_start": rfc3339_ms(self.data_start * 1000),
            "data_end": rfc3339_ms(self.data_end * 1000),
            "detect_from": rfc3339_ms(self.detect_from * 1000),
            "seconds": round(self.seconds, 2),
            "records_per_second": round(self.records / self.seconds) if self.seconds else None,
            "stage_seconds": self.timings,
            "counts": counts,
        }


def analyze(spark: Any, options: AnalyzeOptions, progress: Progress) -> AnalysisResult:
    """Roll the records up in Spark, then run every detector on the rolled-up rows.

    The three Spark queries (:mod:`.rollups`) are submitted at once from a small thread
    pool; none waits for the detection window (they group by hour, and the window is
    applied to their Arrow tables). The failed logins and the per-principal-hour rollup
    run in Spark's first scheduler pool, the per-topic pass in the later one, so Python
    runs the detectors on the first two results while Spark still works on the third.
    """
    progress.stage(f"reading {', '.join(options.logs)} ({options.fmt})")
    fmt = detect_format(options.logs) if options.fmt == "auto" else options.fmt
    stored = flags.stored_in(options.logs) if fmt == "parquet" else False
    frame = read_logs(spark, options.logs, fmt)
    prepared = rollups.parse_needed(rollups.prepare(frame, stored), fmt)
    events = rollups.records(prepared)
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kgw-spark") as pool:
        pending_singles = pool.submit(
            in_pool(spark, FIRST, lambda: rollups.singles(events, "logins"))
        )
        pending_groups = pool.submit(
            in_pool(spark, FIRST, rollups.principal_hours(prepared).toArrow)
        )
        pending_topics = pool.submit(in_pool(spark, LATER, rollups.topic_hours(events).toArrow))
        pending_admin = pool.submit(in_pool(spark, LATER, lambda: rollups.singles(events, "admin")))
        try:
            found = detect(
                pending_singles.result,
                pending_groups.result,
                pending_topics.result,
                options,
                progress,
                pending_admin.result,
            )
        except LogInputError:
            spark.sparkContext.cancelAllJobs()  # the topics pass: nothing to wait for
            raise
        finally:
            prepared.unpersist()

    progress.stage("timelines for the report")
    lines = timelines(found.hours, found.singles, found.findings, options.timelines)
    return AnalysisResult(
        found.findings,
        found.records,
        found.skipped,
        found.data_start,
        found.data_end,
        found.detect_from,
        time.monotonic() - progress.began,
        dict(progress.timings),
        lines,
    )


@dataclass(slots=True)
class Detected:
    """The findings of the detectors on the rollups, with the bounds of the data."""

    findings: list[Finding]
    records: int
    skipped: int
    data_start: int
    data_end: int
    detect_from: int
    hours: list[HourRow]
    singles: list[Single]


def detect(
    get_singles: Callable[[], list[Single]],
    get_groups: Callable[[], Any],
    get_topics: Callable[[], Any],
    options: AnalyzeOptions,
    progress: Progress,
    get_admin: Callable[[], list[Single]] | None = None,
) -> Detected:
    """Every detector on the three rollups (:mod:`.rollups`), each asked for when the
    stage that needs it starts: the batch job passes the futures of its Spark passes,
    so the detectors run on the first results while Spark still works on the last;
    ``--follow`` passes the rollups it merged (:mod:`.state`). ``get_admin``: the
    administrative requests apart (the batch job's last pass; ``get_singles`` then
    holds none), asked for at the last stage, the only one that uses them. Same rows, same
    findings, same evidence."""
    t = options.thresholds
    where = ", ".join(options.logs)
    progress.stage("failed logins and throttling: bursts, spraying, storms")
    singles = get_singles()
    findings = run.auth_stage(singles, t)
    progress.say(f"{len(singles):,} failed logins, throttled and administrative requests")

    progress.stage("rolling up per principal and hour")
    groups = get_groups()
    total, records, data_start, data_end = rollups.bounds(groups)
    if not records or data_start is None or data_end is None:
        raise LogInputError(f"no access-log records in {where}")
    skipped = total - records
    # The detection window starts on the hour: the last ``detect_hours``, rounded up.
    detect_from = -(-int(data_end - options.detect_hours * HOUR) // HOUR) * HOUR
    detect_from = max(detect_from, data_start)
    progress.say(
        f"{records:,} records from {rfc3339_ms(data_start * 1000)} to "
        f"{rfc3339_ms(data_end * 1000)}; findings from {rfc3339_ms(detect_from * 1000)}"
        + (f"; {skipped:,} unreadable lines skipped" if skipped else "")
    )
    hours = rollups.hour_rows(groups)
    progress.say(f"{len(hours):,} principal-hours")

    progress.stage("spikes, sustained volume, unusual hours, networks, patient guessing")
    more, context = run.hourly_stage(
        singles, hours, rollups.host_rows(groups, detect_from), detect_from, data_end, t
    )
    findings += more

    progress.stage("probing, first access to a topic, newcomers, destructive admin")
    topics = get_topics()
    if get_admin is not None:  # the batch job's administrative requests, a pass of their own
        context = replace(context, admin=[s for s in get_admin() if s.kind == "admin"])
    findings += run.topic_stage(
        context,
        rollups.denied_topics(topics),
        rollups.new_topic_rows(topics, detect_from),
        rollups.topic_users(topics),
        t,
    )
    findings = rank(findings)
    progress.say(f"{len(findings)} findings")
    return Detected(findings, records, skipped, data_start, data_end, detect_from, hours, singles)


def timelines(
    hours: list[HourRow], singles: list[Single], findings: list[Finding], limit: int
) -> dict[str, list[dict[str, int]]]:
    """Hourly allowed, denied and failed-login counts for the principals most in the findings."""
    chosen: list[str] = []
    for finding in findings:
        if finding.principal and finding.principal not in chosen:
            chosen.append(finding.principal)
        if len(chosen) >= limit:
            break
    wanted = set(chosen)
    series: dict[str, dict[int, dict[str, int]]] = {name: {} for name in chosen}

    def point(principal: str, hour: int) -> dict[str, int]:
        return series[principal].setdefault(
            hour, {"hour": hour, "allowed": 0, "denied": 0, "failed": 0}
        )

    for row in hours:
        if row.principal in wanted:
            p = point(row.principal, row.hour)
            p["allowed"], p["denied"] = row.allowed, row.denied
    for single in singles:
        if single.kind == "auth_failure" and single.principal in wanted:
            point(single.principal, single.ts // HOUR * HOUR)["failed"] += 1
    return {name: [points[h] for h in sorted(points)] for name, points in series.items()}


def write_outputs(result: AnalysisResult, options: AnalyzeOptions) -> dict[str, Path]:
    """findings.json, findings.parquet/, summary.json and report.html under ``options.out``.

    The findings are few, so their Parquet is written here with pyarrow (one file in
    the ``findings.parquet/`` directory Spark reads as a table), not by another job.
    """
    from .report import render_report

    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    meta = {**result.meta(), "inputs": list(options.logs), "thresholds": asdict(options.thresholds)}
    paths = {
        "json": out / "findings.json",
        "parquet": out / "findings.parquet",
        "summary": out / "summary.json",
    }
    write_findings_json(paths["json"], result.findings, meta)
    write_findings_parquet(paths["parquet"], result.findings)
    paths["summary"].write_text(json.dumps(meta, indent=1) + "\n")
    if options.report:
        paths["report"] = out / "report.html"
        paths["report"].write_text(render_report(result, meta), encoding="utf-8")
    return paths
