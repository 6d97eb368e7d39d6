"""``kgw report compliance``: who accessed what, what was denied, who changed the rules.

For a period ``[from, to)``: every (principal, topic, operation) with its request
count and first and last time; every denied request and failed login; every
admin change in the audit trail, with the trail's verification result. Written as
CSV files (complete) and one HTML page (denials capped, the CSV has them all).
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ..audit import AuditError, AuditTrail
from . import flags
from .claimed import failed_login_subject
from .load import read_logs, usable
from .page import page, table
from .records import rfc3339_ms
from .spark import Progress

# Kafka's ACL operation behind each API (what an auditor asks about).
OPERATIONS = {
    "produce": "WRITE",
    "fetch": "READ",
    "offset_commit": "READ",
    "txn_offset_commit": "READ",
    "share_fetch": "READ",
    "share_acknowledge": "READ",
    "describe_producers": "READ",
    "add_partitions_to_txn": "WRITE",
    "metadata": "DESCRIBE",
    "list_offsets": "DESCRIBE",
    "offset_fetch": "DESCRIBE",
    "offset_for_leader_epoch": "DESCRIBE",
    "describe_configs": "DESCRIBE_CONFIGS",
    "alter_configs": "ALTER_CONFIGS",
    "incremental_alter_configs": "ALTER_CONFIGS",
    "create_topics": "CREATE",
    "create_partitions": "ALTER",
    "delete_topics": "DELETE",
    "delete_records": "DELETE",
    "offset_delete": "DELETE",
}
HTML_DENIED_LIMIT = 2000
ACCESS_COLUMNS = (
    "principal",
    "tenant",
    "topic",
    "operation",
    "api",
    "requests",
    "request_bytes",
    "addresses",
    "first",
    "last",
)
DENIED_COLUMNS = (
    "ts",
    "kind",
    "principal",
    "tenant",
    "client_host",
    "api",
    "operation",
    "resources",
    "error_code",
    "rule",
)
CHANGE_COLUMNS = ("seq", "ts", "actor", "action", "target", "before", "after")


@dataclass(slots=True)
class ComplianceResult:
    start: float
    end: float
    access: list[dict[str, Any]]
    denied_total: int
    denied_sample: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    audit_status: str  # "verified", "FAILED: …", or "no audit trail given"
    audit_problems: list[str] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)


def _operation() -> Any:
    from itertools import chain

    from pyspark.sql import functions as F

    mapping = F.create_map(*[F.lit(x) for x in chain.from_iterable(OPERATIONS.items())])
    return F.coalesce(mapping[F.col("api")], F.upper(F.col("api")))


def _iso(column: str) -> Any:
    from pyspark.sql import functions as F

    return F.date_format(F.col(column), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def compliance(
    spark: Any,
    logs: list[str],
    out: Path,
    start: float,
    end: float,
    audit: Path | None,
    key_file: Path | None,
    progress: Progress,
    fmt: str = "auto",
) -> ComplianceResult:
    from pyspark.sql import functions as F

    out.mkdir(parents=True, exist_ok=True)
    progress.stage(f"reading {', '.join(logs)}")
    frame = usable(read_logs(spark, logs, fmt))
    period = frame.where(
        (F.col("ts") >= F.timestamp_seconds(F.lit(start)))
        & (F.col("ts") < F.timestamp_seconds(F.lit(end)))
    ).cache()
    requests = period.where(F.col("type") == "request").withColumn("operation", _operation())

    progress.stage("access per principal, topic and operation")
    refused = F.coalesce(F.col("denied"), F.array().cast("array<string>"))
    access = (
        requests.where(F.col("decision").isin(*flags.ALLOWED))
        .select("*", F.explode("topics").alias("topic"))
        # a partial request's refused topics were not accessed (``denied``, from 28 Nov)
        .where(~F.array_contains(refused, F.concat(F.lit("topic:"), F.col("topic"))))
        .groupBy("principal", "tenant", "topic", "operation", "api")
        .agg(
            F.count("*").alias("requests"),
            F.sum(
                F.coalesce(F.col("bytes_in"), F.lit(0)) + F.coalesce(F.col("bytes_out"), F.lit(0))
            ).alias("request_bytes"),
            F.countDistinct("client_host").alias("addresses"),
            F.min("ts").alias("first"),
            F.max("ts").alias("last"),
        )
        .withColumn("first", _iso("first"))
        .withColumn("last", _iso("last"))
        .orderBy("principal", "topic", "operation", "api")
    )
    access_rows = [row.asDict() for row in access.collect()]
    paths = {
        "access": out / "access.csv",
        "denied": out / "denied.csv",
        "changes": out / "admin-changes.csv",
        "html": out / "compliance.html",
    }
    _write_csv(paths["access"], ACCESS_COLUMNS, access_rows)

    progress.stage("denied requests and failed logins")
    named = F.concat_ws(
        " ", F.coalesce(F.col("topics"), F.array()), F.coalesce(F.col("groups"), F.array())
    )
    # what was refused, where the record says (a partial request's allowed part is not)
    resources = F.when(F.size(refused) > 0, F.concat_ws(" ", refused)).otherwise(named)
    denied = (
        requests.where(F.col("decision").isin(*flags.DENIED))
        .select(
            _iso("ts").alias("ts"),
            F.lit("authorization").alias("kind"),
            "principal",
            "tenant",
            "client_host",
            "api",
            "operation",
            resources.alias("resources"),
            "error_code",
            "rule",
        )
        .unionByName(
            period.where((F.col("event") == "auth") & (F.col("outcome") == "failure")).select(
                _iso("ts").alias("ts"),
                F.lit("authentication").alias("kind"),
                failed_login_subject().alias("principal"),
                "tenant",
                "client_host",
                F.lit("sasl_authenticate").alias("api"),
                F.lit("AUTHENTICATE").alias("operation"),
                F.lit("").alias("resources"),
                F.lit(None).cast("int").alias("error_code"),
                F.col("reason").alias("rule"),
            )
        )
        .orderBy("ts")
    )
    denied_total = 0
    sample: list[dict[str, Any]] = []
    with open(paths["denied"], "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, DENIED_COLUMNS)
        writer.writeheader()
        for row in denied.toLocalIterator():
            record = row.asDict()
            writer.writerow(inert(record))
            denied_total += 1
            if len(sample) < HTML_DENIED_LIMIT:
                sample.append(record)
    period.unpersist()

    progress.stage("admin changes from the audit trail")
    changes, status, problems = _changes(audit, key_file, start, end)
    _write_csv(paths["changes"], CHANGE_COLUMNS, changes)
    result = ComplianceResult(
        start, end, access_rows, denied_total, sample, changes, status, problems, paths
    )
    paths["html"].write_text(render(result, logs), encoding="utf-8")
    return result


def _changes(
    audit: Path | None, key_file: Path | None, start: float, end: float
) -> tuple[list[dict[str, Any]], str, list[str]]:
    if audit is None:
        return [], "no audit trail given (--audit FILE)", []
    try:
        trail = AuditTrail.open(audit, key_file)
        report = trail.verify()
        lo, hi = rfc3339_ms(int(start * 1000)), rfc3339_ms(int(end * 1000))
        rows = [
            {**e, "before": json.dumps(e["before"]), "after": json.dumps(e["after"])}
            for e in trail.entries()
            if lo <= e["ts"] < hi
        ]
    except AuditError as exc:
        return [], f"FAILED: {exc}", [str(exc)]
    if report.ok:
        kind = "keyed" if trail.keyed else "unkeyed"
        return (
            rows,
            f"verified ({report.entries} entries, {kind}, head {report.last_hash[:16]}…)",
            [],
        )
    problems = [str(p) for p in report.problems]
    return rows, f"FAILED: {len(problems)} problem(s) — the trail was tampered with", problems


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(inert(row) for row in rows)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` safe to open in a spreadsheet: a text cell that would start a formula
    (tenants choose topic names, client ids and the names they claim) gets a leading
    ``'`` (OWASP's advice for CSV injection). Numbers are left as they are."""
    return {
        key: f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value
        for key, value in row.items()
    }


def render(result: ComplianceResult, logs: list[str]) -> str:
    period = f"{rfc3339_ms(int(result.start * 1000))} to {rfc3339_ms(int(result.end * 1000))}"
    principals = sorted({r["principal"] for r in result.access if r["principal"]})
    ok = result.audit_status.startswith("verified")
    body = [
        "<h1>KaaS Gateway — compliance report</h1>",
        f'<p class="meta">Period {escape(period)} (UTC, end exclusive). Sources: '
        f"{escape(', '.join(logs))}. Generated {rfc3339_ms(int(time.time() * 1000))}.</p>",
        '<div class="cards">'
        f'<div class="card">principals with access<b>{len(principals)}</b></div>'
        f'<div class="card">principal · topic · operation<b>{len(result.access)}</b></div>'
        f'<div class="card">denied attempts<b id="denied-total">{result.denied_total}</b></div>'
        f'<div class="card">admin changes<b>{len(result.changes)}</b></div></div>',
        "<h2>Access: principals, topics, operations</h2>",
        table(ACCESS_COLUMNS, ([str(r[c]) for c in ACCESS_COLUMNS] for r in result.access)),
        f"<h2>Denied attempts ({result.denied_total})</h2>",
    ]
    if result.denied_total > len(result.denied_sample):
        body.append(
            f'<p class="meta">The first {len(result.denied_sample)} are shown; '
            f"{escape(result.paths['denied'].name)} lists all {result.denied_total}.</p>"
        )
    body.append(
        table(DENIED_COLUMNS, ([_cell(r[c]) for c in DENIED_COLUMNS] for r in result.denied_sample))
    )
    body.append(f"<h2>Admin changes ({len(result.changes)})</h2>")
    body.append(
        f'<p>Audit trail: <span class="{"ok" if ok else "bad"}">'
        f"{escape(result.audit_status)}</span></p>"
    )
    if result.audit_problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in result.audit_problems)
        body.append(f'<ul class="bad">{items}</ul>')
    body.append(
        table(CHANGE_COLUMNS, ([_cell(r[c]) for c in CHANGE_COLUMNS] for r in result.changes))
    )
    return page("kgw report compliance", body)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)
