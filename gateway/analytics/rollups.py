"""The Spark side of ``kgw analyze``: a few aggregations over all records.

Each turns the records into compact rows the detectors read on the driver:
per principal and hour, per principal and address, the topics first used in the
detection window, and the failed logins and throttled requests one by one. The
big aggregations keep to numeric aggregates (a string aggregate such as
``max(tenant)`` would make Spark sort every record).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .detect.rows import HOUR, HostRow, HourRow, Single, TopicRow

ALLOWED = ("allow", "none", "partial")  # partial: some parts were allowed
DENIED = ("deny", "partial")


def prepare(frame: Any) -> Any:
    """The columns the rollups use; ``ok`` false for lines that are not records."""
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


def bounds(prepared: Any) -> tuple[int, int, int | None, int | None]:
    """(lines, records, first second, last second)."""
    from pyspark.sql import functions as F

    ok = F.col("ok")
    row = prepared.agg(
        F.count("*"),
        F.sum(F.when(ok, 1).otherwise(0)),
        F.min(F.when(ok, F.col("ts_s"))),
        F.max(F.when(ok, F.col("ts_s"))),
    ).first()
    return int(row[0]), int(row[1] or 0), row[2], row[3]


def _hour() -> Any:
    from pyspark.sql import functions as F

    return (F.floor(F.col("ts_s") / HOUR) * HOUR).cast("long").alias("hour")


def hourly(events: Any) -> Any:
    """Per principal and hour: allowed, bytes, denied, total, distinct denied topics."""
    from pyspark.sql import functions as F

    requests = events.where((F.col("type") == "request") & F.col("principal").isNotNull())
    is_allowed = F.col("decision").isin(*ALLOWED)
    counts = ("allowed", "bytes", "denied", "total")
    keyed = requests.groupBy("principal", "tenant", _hour()).agg(
        F.sum(F.when(is_allowed, 1).otherwise(0)).alias("allowed"),
        F.sum(F.when(is_allowed, F.col("bytes")).otherwise(0)).alias("bytes"),
        F.sum(F.when(F.col("decision").isin(*DENIED), 1).otherwise(0)).alias("denied"),
        F.count("*").alias("total"),
    )
    per_hour = keyed.groupBy("principal", "hour").agg(
        F.max("tenant").alias("tenant"), *[F.sum(c).alias(c) for c in counts]
    )
    denied_topics = (
        requests.where(F.col("decision").isin(*DENIED))
        .select("principal", _hour(), F.explode("topics").alias("topic"))
        .groupBy("principal", "hour")
        .agg(F.collect_set("topic").alias("denied_topics"))
    )
    return per_hour.join(denied_topics, ["principal", "hour"], "left")


def _columns(frame: Any, key: str, fields: list[str], order: str) -> Any:
    """One row per ``key`` with an array per field, sorted by ``order``: far fewer Python
    objects to build on the driver than one row per record."""
    from pyspark.sql import functions as F

    rows = F.array_sort(F.collect_list(F.struct(order, *[f for f in fields if f != order])))
    packed = frame.groupBy(key).agg(rows.alias("_rows"))
    return packed.select(key, *[F.col("_rows").getField(f).alias(f) for f in fields])


def hour_rows(frame: Any) -> Iterator[HourRow]:
    """The rows of ``hourly``, by principal then hour."""
    fields = ["hour", "tenant", "allowed", "bytes", "denied", "total", "denied_topics"]
    for r in _columns(frame, "principal", fields, "hour").orderBy("principal").toLocalIterator():
        for hour, tenant, allowed, size, denied, total, topics in zip(
            r.hour, r.tenant, r.allowed, r.bytes, r.denied, r.total, r.denied_topics, strict=True
        ):
            yield HourRow(
                r.principal, hour, tenant, allowed, size, denied, total, tuple(topics or ())
            )


def singles(events: Any) -> list[Single]:
    """Failed logins and throttled requests, one row each, in one scan."""
    from pyspark.sql import functions as F

    failed = (F.col("event") == "auth") & (F.col("outcome") == "failure")
    throttled = (F.col("type") == "request") & (F.col("throttle_ms") > 0)
    frame = events.where(failed | throttled).select(
        "ts_s",
        F.when(failed, "auth_failure").otherwise("throttled").alias("kind"),
        "principal",
        "tenant",
        "client_host",
        "throttle_ms",
    )
    return [
        Single(ts, kind, principal, tenant, host, ms)
        for ts, kind, principal, tenant, host, ms in frame.toLocalIterator()
    ]


def host_rows(events: Any, detect_from: int) -> list[HostRow]:
    """Per principal and address: successful logins and allowed requests, before and after."""
    from pyspark.sql import functions as F

    good = events.where(
        F.col("principal").isNotNull()
        & F.col("client_host").isNotNull()
        & (
            (F.col("event") == "auth") & (F.col("outcome") == "success")
            | (F.col("type") == "request") & F.col("decision").isin(*ALLOWED)
        )
    )
    recent = F.col("ts_s") >= detect_from
    frame = good.groupBy("principal", "client_host").agg(
        F.sum(F.when(recent, 0).otherwise(1)).alias("base"),
        F.sum(F.when(recent, 1).otherwise(0)).alias("seen"),
        F.min(F.when(recent, F.col("ts_s"))).alias("first"),
        F.max("ts_s").alias("last"),
    )
    fields = ["client_host", "base", "seen", "first", "last"]
    return [
        HostRow(r.principal, host, base, seen, first, last)
        for r in _columns(frame, "principal", fields, "client_host").toLocalIterator()
        for host, base, seen, first, last in zip(
            r.client_host, r.base, r.seen, r.first, r.last, strict=True
        )
    ]


def new_topic_rows(events: Any, detect_from: int) -> list[TopicRow]:
    """Topics each principal was first allowed to use in the detection window."""
    from pyspark.sql import functions as F

    allowed = events.where(
        (F.col("type") == "request")
        & F.col("decision").isin("allow", "none")
        & (F.size("topics") > 0)
        & F.col("principal").isNotNull()
    )
    recent = F.col("ts_s") >= detect_from

    def did(api: str | None) -> Any:
        kind = F.col("api") == api if api else ~F.col("api").isin("produce", "fetch")
        return F.max(F.when(recent & kind, 1).otherwise(0)).alias(api or "other")

    frame = (
        allowed.select("ts_s", "principal", "api", F.explode("topics").alias("topic"))
        .groupBy("principal", "topic")
        .agg(
            F.min("ts_s").alias("first"),
            F.max("ts_s").alias("last"),
            F.sum(F.when(recent, 1).otherwise(0)).alias("requests"),
            did("produce"),
            did("fetch"),
            did(None),
        )
        .where(F.col("first") >= detect_from)
    )
    return [
        TopicRow(
            r.principal,
            r.topic,
            int(r.first),
            int(r.last),
            int(r.requests),
            bool(r.produce),
            bool(r.fetch),
            bool(r.other),
        )
        for r in frame.collect()
    ]


def parse_needed(prepared: Any, fmt: str) -> Any:
    """Keep text input parsed in memory between the scans; Parquet is cheap to re-read."""
    from pyspark import StorageLevel

    return prepared if fmt == "parquet" else prepared.persist(StorageLevel.MEMORY_AND_DISK)
