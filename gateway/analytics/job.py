"""``kgw analyze``: the Spark job that reads access logs and writes findings.

Stages: load and prepare the records (one cached projection), roll them up per
principal and hour, run the detectors, then write ``findings.json``,
``findings.parquet/``, ``summary.json`` and ``report.html`` under ``--out``.
Each stage logs a progress line.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import kinds
from .detect import access, auth, baseline
from .detect.context import Context, Thresholds
from .findings import Finding, finding_rows, rank, write_findings_json
from .load import LogInputError, detect_format, read_logs
from .records import rfc3339_ms
from .spark import Progress

HOUR = 3600
STAGES = 8


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


def prepare(frame: Any) -> Any:
    """The columns the detectors use; epoch seconds; bytes in and out together; ``ok``
    false for lines that are not records of the schema."""
    from pyspark.sql import functions as F

    ok = F.col("ts").isNotNull() & F.col("type").isin("request", "connection")
    return frame.select(
        F.coalesce(ok, F.lit(False)).alias("ok"),
        F.unix_seconds("ts").alias("ts_s"),
        "type",
        "event",
        "outcome",
        "principal",
        "tenant",
        "client_host",
        "api",
        F.coalesce(F.col("topics"), F.array().cast("array<string>")).alias("topics"),
        "decision",
        F.coalesce(F.col("throttle_ms"), F.lit(0)).alias("throttle_ms"),
        (F.coalesce(F.col("bytes_in"), F.lit(0)) + F.coalesce(F.col("bytes_out"), F.lit(0))).alias(
            "bytes"
        ),
    )


def hourly(events: Any) -> Any:
    """Per principal and clock hour: allowed requests and their bytes, denied, total."""
    from pyspark.sql import functions as F

    requests = events.where((F.col("type") == "request") & F.col("principal").isNotNull())
    is_allowed = F.col("decision").isin("allow", "none", "partial")
    is_denied = F.col("decision").isin("deny", "partial")
    return requests.groupBy("principal", (F.floor(F.col("ts_s") / HOUR) * HOUR).alias("hour")).agg(
        F.max("tenant").alias("tenant"),
        F.sum(F.when(is_allowed, 1).otherwise(0)).alias("allowed"),
        F.sum(F.when(is_allowed, F.col("bytes")).otherwise(0)).alias("bytes"),
        F.sum(F.when(is_denied, 1).otherwise(0)).alias("denied"),
        F.count("*").alias("total"),
    )


def denied_topics(events: Any) -> Any:
    from pyspark.sql import functions as F

    denied = events.where(
        (F.col("type") == "request")
        & F.col("decision").isin("deny", "partial")
        & F.col("principal").isNotNull()
    )
    return denied.groupBy("principal", (F.floor(F.col("ts_s") / HOUR) * HOUR).alias("hour")).agg(
        F.max("tenant").alias("tenant"),
        F.count("*").alias("denied"),
        F.array_distinct(F.flatten(F.collect_list("topics"))).alias("topics"),
    )


def sparse(events: Any) -> Any:
    """The few records some detectors need one by one: failed logins and throttled requests."""
    from pyspark.sql import functions as F

    failed = (F.col("event") == "auth") & (F.col("outcome") == "failure")
    throttled = (F.col("type") == "request") & (F.col("throttle_ms") > 0)
    return events.where(failed | throttled).select(
        "ts_s",
        F.when(failed, "auth_failure").otherwise("throttled").alias("kind"),
        "principal",
        "tenant",
        "client_host",
        "throttle_ms",
    )


def analyze(spark: Any, options: AnalyzeOptions, progress: Progress) -> AnalysisResult:
    """Run every detector. Parquet is scanned again per stage (only the columns each
    needs); other input is parsed once and kept in memory (and on disk if need be)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    progress.stage(f"reading {', '.join(options.logs)} ({options.fmt})")
    fmt = detect_format(options.logs) if options.fmt == "auto" else options.fmt
    prepared = prepare(read_logs(spark, options.logs, fmt))
    if fmt != "parquet":
        prepared = prepared.persist(StorageLevel.MEMORY_AND_DISK)
    ok = F.col("ok")
    bounds = prepared.agg(
        F.count("*"),
        F.sum(F.when(ok, 1).otherwise(0)),
        F.min(F.when(ok, F.col("ts_s"))),
        F.max(F.when(ok, F.col("ts_s"))),
    ).first()
    total, records, data_start, data_end = int(bounds[0]), int(bounds[1] or 0), bounds[2], bounds[3]
    if not records:
        raise LogInputError(f"no access-log records in {', '.join(options.logs)}")
    skipped = total - records
    events = prepared.where(ok).drop("ok")
    # The detection window starts on the hour: the last ``detect_hours``, rounded up.
    detect_from = -(-int(data_end - options.detect_hours * HOUR) // HOUR) * HOUR
    detect_from = max(detect_from, data_start)
    progress.say(
        f"{records:,} records from {rfc3339_ms(data_start * 1000)} to "
        f"{rfc3339_ms(data_end * 1000)}; findings from {rfc3339_ms(detect_from * 1000)}"
        + (f"; {skipped:,} unreadable lines skipped" if skipped else "")
    )

    progress.stage("rolling up per principal and hour; failed logins and throttling")
    per_hour = hourly(events).persist(StorageLevel.MEMORY_AND_DISK)
    first_seen = per_hour.groupBy("principal").agg(F.min("hour").alias("first_hour")).persist()
    singles = sparse(events).persist(StorageLevel.MEMORY_AND_DISK)
    ctx = Context(
        spark,
        events,
        per_hour,
        data_start,
        data_end,
        detect_from,
        options.thresholds,
        first_seen,
        singles,
    )
    progress.say(
        f"{per_hour.count():,} principal-hours, {singles.count():,} failed logins "
        "and throttled requests"
    )

    findings: list[Finding] = []
    progress.stage("failed authentication: bursts and spraying")
    findings += auth.auth_bursts(ctx)
    progress.stage("volume spikes, denied spikes, unusual hours")
    findings += baseline.volume_spikes(ctx)
    findings += baseline.denied_spikes(ctx)
    findings += baseline.unusual_hours(ctx)
    progress.stage("probing (distinct denied topics)")
    findings += baseline.probing(ctx, denied_topics(events))
    progress.stage("new or rare client networks")
    findings += access.new_addresses(ctx)
    progress.stage("first access to a topic, throttle storms")
    findings += access.first_topic_access(ctx)
    findings += access.throttle_storms(ctx)
    findings = rank(findings)
    progress.say(f"{len(findings)} findings")

    progress.stage("timelines for the report")
    lines = timelines(ctx, findings, options.timelines)
    for frame in (prepared, per_hour, first_seen, singles):
        frame.unpersist()
    return AnalysisResult(
        findings,
        records,
        skipped,
        data_start,
        data_end,
        detect_from,
        time.monotonic() - progress.began,
        dict(progress.timings),
        lines,
    )


def timelines(ctx: Context, findings: list[Finding], limit: int) -> dict[str, list[dict[str, int]]]:
    """Hourly allowed, denied and failed-login counts for the principals most in the findings."""
    from pyspark.sql import functions as F

    chosen: list[str] = []
    for finding in findings:
        if finding.principal and finding.principal not in chosen:
            chosen.append(finding.principal)
        if len(chosen) >= limit:
            break
    if not chosen:
        return {}
    hours = ctx.hourly.where(F.col("principal").isin(chosen)).select(
        "principal", "hour", "allowed", "denied"
    )
    fails = (
        auth.failures(ctx)
        .where(F.col("principal").isin(chosen))
        .groupBy("principal", (F.floor(F.col("ts_s") / HOUR) * HOUR).alias("hour"))
        .agg(F.count("*").alias("failed"))
    )
    rows = hours.join(fails, ["principal", "hour"], "full").fillna(0).collect()
    series: dict[str, list[dict[str, int]]] = {name: [] for name in chosen}
    for r in sorted(rows, key=lambda r: (r.principal, r.hour)):
        series[r.principal].append(
            {
                "hour": int(r.hour),
                "allowed": int(r.allowed),
                "denied": int(r.denied),
                "failed": int(r.failed),
            }
        )
    return series


def write_outputs(spark: Any, result: AnalysisResult, options: AnalyzeOptions) -> dict[str, Path]:
    """findings.json, findings.parquet/, summary.json and report.html under ``options.out``."""
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
    rows = finding_rows(result.findings)
    schema = (
        "id string, detector string, title string, severity string, score double, "
        "entity_type string, entity string, principal string, client_host string, "
        "tenant string, start string, end string, summary string, evidence string"
    )
    frame = spark.createDataFrame([tuple(row.values()) for row in rows], schema)
    frame.withColumn("start", frame.start.cast("timestamp")).withColumn(
        "end", frame.end.cast("timestamp")
    ).coalesce(1).write.mode("overwrite").parquet(str(paths["parquet"]))
    paths["summary"].write_text(json.dumps(meta, indent=1) + "\n")
    if options.report:
        paths["report"] = out / "report.html"
        paths["report"].write_text(render_report(result, meta), encoding="utf-8")
    return paths
