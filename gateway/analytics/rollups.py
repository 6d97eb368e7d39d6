"""The Spark side of ``kgw analyze``: a few aggregations, collected as Arrow tables.

``principal_hours`` is the biggest: per principal, tenant and hour, numeric sums
only (the request counts, and the lines, records and first and last second that
bound the data, so no pass of its own finds them). It is cached and the hourly
rows come from it. The other passes read only the columns they need (Parquet
column pruning; the denied requests' filter is pushed to the reader too): the
denied requests (their topics), the failed logins and throttled requests one by
one, per principal and address, and per principal and topic. Every result
reaches the driver as an Arrow table, flat and sorted there, instead of as Row
objects packed into per-principal arrays by another Spark aggregation. Big
aggregations keep to numeric aggregates (a string ``max()`` would make Spark
sort every record).
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


def _hour() -> Any:
    from pyspark.sql import functions as F

    return (F.floor(F.col("ts_s") / HOUR) * HOUR).cast("long").alias("hour")


def principal_hours(prepared: Any) -> Any:
    """Per principal, tenant and hour, numeric sums only (the biggest rollup).

    ``lines``/``records``/``first``/``last`` give the bounds of the data, so no
    separate pass is needed for them; ``total``, ``allowed``, ``bytes`` and
    ``denied`` count the requests. Only numeric aggregates: Spark hashes, never sorts.
    """
    from pyspark.sql import functions as F

    col = F.col
    ok = col("ok")
    request = ok & F.coalesce(col("type") == "request", F.lit(False))
    allowed = request & F.coalesce(col("decision").isin(*ALLOWED), F.lit(False))
    denied = request & F.coalesce(col("decision").isin(*DENIED), F.lit(False))

    def count(condition: Any, name: str) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0)).cast("long").alias(name)

    return prepared.groupBy("principal", "tenant", _hour()).agg(
        F.count("*").alias("lines"),
        count(ok, "records"),
        F.min(F.when(ok, col("ts_s"))).alias("first"),
        F.max(F.when(ok, col("ts_s"))).alias("last"),
        count(request, "total"),
        count(allowed, "allowed"),
        F.sum(F.when(allowed, col("bytes")).otherwise(0)).cast("long").alias("bytes"),
        count(denied, "denied"),
    )


def bounds(groups: Any) -> tuple[int, int, int | None, int | None]:
    """(lines, records, first second, last second)."""
    from pyspark.sql import functions as F

    row = groups.agg(F.sum("lines"), F.sum("records"), F.min("first"), F.max("last")).first()
    return int(row[0] or 0), int(row[1] or 0), row[2], row[3]


def hourly(groups: Any, events: Any) -> tuple[Any, Any]:
    """Per principal, tenant and hour: allowed, bytes, denied, total; and per principal
    and hour the distinct denied topics, from the few denied records (a filter Parquet
    applies while reading), never from an ``explode`` of every record."""
    from pyspark.sql import functions as F

    counts = ("allowed", "bytes", "denied", "total")
    per_tenant = groups.where(F.col("principal").isNotNull() & (F.col("total") > 0)).select(
        "principal", "tenant", "hour", *counts
    )
    denied_topics = (
        events.where(
            (F.col("type") == "request")
            & F.col("principal").isNotNull()
            & F.col("decision").isin(*DENIED)
        )
        .select("principal", _hour(), F.explode("topics").alias("topic"))
        .groupBy("principal", "hour")
        .agg(F.collect_set("topic").alias("denied_topics"))
    )
    return per_tenant, denied_topics


def hour_rows(frames: tuple[Any, Any]) -> Iterator[HourRow]:
    """The rows of ``hourly``, by principal then hour; a principal-hour seen under
    two tenants is one row with the greater tenant name."""
    per_tenant, denied = (frame.toArrow() for frame in frames)
    topics = {
        (principal, hour): tuple(names)
        for principal, hour, names in zip(
            *(denied.column(name).to_pylist() for name in ("principal", "hour", "denied_topics")),
            strict=True,
        )
    }
    table = per_tenant.sort_by([("principal", "ascending"), ("hour", "ascending")])
    names = ("principal", "hour", "tenant", "allowed", "bytes", "denied", "total")
    last: HourRow | None = None
    for principal, hour, tenant, allowed, size, denied_n, total in zip(
        *(table.column(name).to_pylist() for name in names), strict=True
    ):
        if last is not None and (last.principal, last.hour) == (principal, hour):
            last = HourRow(
                principal,
                hour,
                max((t for t in (last.tenant, tenant) if t is not None), default=None),
                last.allowed + allowed,
                last.bytes + size,
                last.denied + denied_n,
                last.total + total,
                last.denied_topics,
            )
            continue
        if last is not None:
            yield last
        last = HourRow(
            principal,
            hour,
            tenant,
            allowed,
            size,
            denied_n,
            total,
            topics.get((principal, hour), ()),
        )
    if last is not None:
        yield last


def singles(events: Any) -> list[Single]:
    """Failed logins and throttled requests, one row each."""
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
    table = frame.toArrow()
    return [
        Single(*values)
        for values in zip(*(column.to_pylist() for column in table.columns), strict=True)
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
        F.sum(F.when(recent, 0).otherwise(1)).cast("long").alias("base"),
        F.sum(F.when(recent, 1).otherwise(0)).cast("long").alias("seen"),
        F.min(F.when(recent, F.col("ts_s"))).alias("first"),
        F.max("ts_s").alias("last"),
    )
    table = frame.toArrow().sort_by([("principal", "ascending"), ("client_host", "ascending")])
    names = ("principal", "client_host", "base", "seen", "first", "last")
    return [
        HostRow(*values)
        for values in zip(*(table.column(name).to_pylist() for name in names), strict=True)
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
            F.sum(F.when(recent, 1).otherwise(0)).cast("long").alias("requests"),
            did("produce"),
            did("fetch"),
            did(None),
        )
        .where(F.col("first") >= detect_from)
    )
    table = frame.toArrow()
    names = ("principal", "topic", "first", "last", "requests", "produce", "fetch", "other")
    return [
        TopicRow(p, topic, int(first), int(last), int(requests), bool(pr), bool(fe), bool(ot))
        for p, topic, first, last, requests, pr, fe, ot in zip(
            *(table.column(name).to_pylist() for name in names), strict=True
        )
    ]


def parse_needed(prepared: Any, fmt: str) -> Any:
    """Keep text input parsed in memory between the passes; Parquet is cheap to re-read."""
    from pyspark import StorageLevel

    return prepared if fmt == "parquet" else prepared.persist(StorageLevel.MEMORY_AND_DISK)
