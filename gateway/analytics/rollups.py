"""The Spark side of ``kgw analyze``: a few aggregations, collected as Arrow tables.

``principal_hours`` is the biggest: per principal, tenant and hour, numeric sums
only (the request counts, and the lines, records and first and last second that
bound the data, so no pass of its own finds them); its Arrow table gives the
bounds and the hourly rows. The other passes read only the columns they need (Parquet
column pruning): the denied requests (their topics), the failed logins and
throttled requests one by one, per principal and address, and per principal and
topic. What a record is (request, allowed, denied, login, API) is a bit test on
its ``flags`` (:mod:`.flags`), never a string comparison per record. Every result
reaches the driver as an Arrow table, flat and sorted there, instead of as Row
objects packed into per-principal arrays by another Spark aggregation. Big
aggregations keep to numeric aggregates (a string ``max()`` would make Spark
sort every record).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import flags
from .detect.rows import HOUR, HostRow, HourRow, Single, TopicRow
from .flags import Flag, has


def prepare(frame: Any, flags_stored: bool | None = None) -> Any:
    """The columns the rollups use: the record's ``flags`` (:mod:`.flags`; see
    :func:`.flags.of` for ``flags_stored``), its second, who and where from, topics,
    throttle time and bytes."""
    from pyspark.sql import functions as F

    return frame.select(
        flags.of(frame, flags_stored).alias("flags"),
        F.unix_seconds("ts").alias("ts_s"),
        "principal",
        "tenant",
        "client_host",
        F.coalesce(F.col("topics"), F.array().cast("array<string>")).alias("topics"),
        F.coalesce(F.col("throttle_ms"), F.lit(0)).alias("throttle_ms"),
        (F.coalesce(F.col("bytes_in"), F.lit(0)) + F.coalesce(F.col("bytes_out"), F.lit(0))).alias(
            "bytes"
        ),
    )


def records(prepared: Any) -> Any:
    """The rows of ``prepared`` that are records (not unreadable lines)."""
    return prepared.where(has(Flag.RECORD))


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
    ok = has(Flag.RECORD)

    def count(flag: Flag, name: str) -> Any:
        return F.sum(F.when(has(flag), 1).otherwise(0)).cast("long").alias(name)

    return prepared.groupBy("principal", "tenant", _hour()).agg(
        F.count("*").alias("lines"),
        count(Flag.RECORD, "records"),
        F.min(F.when(ok, col("ts_s"))).alias("first"),
        F.max(F.when(ok, col("ts_s"))).alias("last"),
        count(Flag.REQUEST, "total"),
        count(Flag.ALLOWED, "allowed"),
        F.sum(F.when(has(Flag.ALLOWED), col("bytes")).otherwise(0)).cast("long").alias("bytes"),
        count(Flag.DENIED, "denied"),
    )


def bounds(groups: Any) -> tuple[int, int, int | None, int | None]:
    """(lines, records, first second, last second) of the Arrow table of ``principal_hours``."""
    import pyarrow.compute as pc

    def total(name: str) -> int:
        return int(pc.sum(groups.column(name)).as_py() or 0)

    first = pc.min(groups.column("first")).as_py()
    last = pc.max(groups.column("last")).as_py()
    return total("lines"), total("records"), first, last


def denied_topics(events: Any) -> Any:
    """Per principal and hour, the distinct topics of denied requests (few records)."""
    from pyspark.sql import functions as F

    return (
        events.where(has(Flag.DENIED) & F.col("principal").isNotNull())
        .select("principal", _hour(), F.explode("topics").alias("topic"))
        .groupBy("principal", "hour")
        .agg(F.collect_set("topic").alias("denied_topics"))
    )


def hour_rows(groups: Any, denied: Any) -> Iterator[HourRow]:
    """Per principal and hour, by principal then hour, from the Arrow tables of
    ``principal_hours`` and ``denied_topics``: allowed, bytes, denied and total requests
    and the denied topics; a principal-hour seen under two tenants is one row with the
    greater tenant name."""
    import pyarrow.compute as pc

    topics = {
        (principal, hour): tuple(names)
        for principal, hour, names in zip(
            *(denied.column(name).to_pylist() for name in ("principal", "hour", "denied_topics")),
            strict=True,
        )
    }
    per_tenant = groups.filter(
        pc.and_(pc.is_valid(groups.column("principal")), pc.greater(groups.column("total"), 0))
    )
    counts = ("allowed", "bytes", "denied", "total")
    merged = (
        per_tenant.group_by(["principal", "hour"])
        .aggregate([("tenant", "max"), *((name, "sum") for name in counts)])
        .sort_by([("principal", "ascending"), ("hour", "ascending")])
    )
    names = ("principal", "hour", "tenant_max", *(f"{name}_sum" for name in counts))
    for principal, hour, tenant, allowed, size, denied_n, total in zip(
        *(merged.column(name).to_pylist() for name in names), strict=True
    ):
        yield HourRow(
            principal,
            hour,
            tenant,
            allowed,
            size,
            denied_n,
            total,
            topics.get((principal, hour), ()),
        )


def singles(events: Any) -> list[Single]:
    """Failed logins and throttled requests, one row each."""
    from pyspark.sql import functions as F

    frame = events.where(has(Flag.AUTH_FAILURE | Flag.THROTTLED)).select(
        "ts_s",
        F.when(has(Flag.AUTH_FAILURE), "auth_failure").otherwise("throttled").alias("kind"),
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
        & has(Flag.AUTH_SUCCESS | Flag.ALLOWED)
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
        has(Flag.FULLY_ALLOWED) & (F.size("topics") > 0) & F.col("principal").isNotNull()
    )
    recent = F.col("ts_s") >= detect_from

    def did(flag: Flag, name: str) -> Any:
        return F.max(F.when(recent & has(flag), 1).otherwise(0)).alias(name)

    frame = (
        allowed.select("ts_s", "principal", "flags", F.explode("topics").alias("topic"))
        .groupBy("principal", "topic")
        .agg(
            F.min("ts_s").alias("first"),
            F.max("ts_s").alias("last"),
            F.sum(F.when(recent, 1).otherwise(0)).cast("long").alias("requests"),
            did(Flag.PRODUCE, "produce"),
            did(Flag.FETCH, "fetch"),
            did(Flag.OTHER_API, "other"),
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
    """Keep text input parsed in memory between the passes; Parquet is cheap to re-read.

    The cache is filled here, before the passes start together: concurrent queries on
    an empty cache would each parse the text."""
    from pyspark import StorageLevel

    if fmt == "parquet":
        return prepared
    cached = prepared.persist(StorageLevel.MEMORY_AND_DISK)
    cached.count()
    return cached
