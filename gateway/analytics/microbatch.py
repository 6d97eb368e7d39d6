"""The three rollups of one ``--follow`` micro-batch, made in Arrow from one Spark pass.

A micro-batch is small (seconds of traffic): Spark reads it from Kafka and parses
the fields the rollups use (:func:`.rollups.prepare`) in one pass, collected as an
Arrow table; the rollups are then grouped here, in Arrow's C++ kernels, by the rules
of :mod:`.rollups` (the same keys, sums, minimums, maximums and bitwise or, nulls
grouped and skipped as Spark does), instead of three more Spark jobs with their
shuffles, a cache and their scheduling per trigger. ``tests/unit/analytics`` checks
the tables against Spark's on the same records. The batch job, whose input is
millions of records, keeps its Spark passes.
"""

from __future__ import annotations

from typing import Any

from .detect.newcomers import ADMIN_APIS
from .flags import Flag
from .rollups import API_BITS
from .state import Rollups

HOUR = 3600


def _has(flags: Any, flag: Flag) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.not_equal(pc.bit_wise_and(flags, pa.scalar(int(flag), flags.type)), 0)


def _count(condition: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(condition, pa.scalar(1, pa.int64()), pa.scalar(0, pa.int64()))


def _when(condition: Any, values: Any) -> Any:
    """``values`` where ``condition``, null elsewhere (Spark's ``when`` without ``otherwise``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(condition, values, pa.nulls(len(values), values.type))


def _hour(ts: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.multiply(pc.divide(ts, pa.scalar(HOUR, ts.type)), pa.scalar(HOUR, ts.type))


def rollups_of(prepared: Any) -> Rollups:
    """The rollups of an Arrow table with :func:`.rollups.prepare`'s columns."""
    return Rollups(principal_hours(prepared), topic_hours(prepared), singles(prepared))


def principal_hours(table: Any) -> Any:
    """As :func:`.rollups.principal_hours`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flags, ts = table.column("flags"), table.column("ts_s").cast(pa.int64())
    record = _has(flags, Flag.RECORD)
    good = pc.and_(
        _has(flags, Flag.AUTH_SUCCESS | Flag.ALLOWED),
        pc.and_(pc.is_valid(table.column("principal")), pc.is_valid(table.column("client_host"))),
    )
    allowed = _has(flags, Flag.ALLOWED)
    work = pa.table(
        {
            "principal": table.column("principal"),
            "tenant": table.column("tenant"),
            "hour": _hour(ts),
            "host": _when(good, table.column("client_host")),
            "lines": pa.repeat(pa.scalar(1, pa.int64()), table.num_rows),
            "records": _count(record),
            "first": _when(record, ts),
            "last": _when(record, ts),
            "total": _count(_has(flags, Flag.REQUEST)),
            "allowed": _count(allowed),
            "bytes": pc.if_else(
                allowed, table.column("bytes").cast(pa.int64()), pa.scalar(0, pa.int64())
            ),
            "denied": _count(_has(flags, Flag.DENIED)),
        }
    )
    sums = ("lines", "records", "total", "allowed", "bytes", "denied")
    aggregates = [*((c, "sum") for c in sums), ("first", "min"), ("last", "max")]
    merged = work.group_by(["principal", "tenant", "hour", "host"], use_threads=False).aggregate(
        aggregates
    )
    names = {f"{c}_{op}": c for c, op in aggregates}
    merged = merged.rename_columns([names.get(n, n) for n in merged.column_names])
    order = ("principal", "tenant", "hour", "host", "lines", "records", "first", "last")
    return merged.select([*order, "total", "allowed", "bytes", "denied"])


def topic_hours(table: Any) -> Any:
    """As :func:`.rollups.topic_hours`: the topics of the fully allowed and the denied
    requests with a principal, one row per topic named."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flags = table.column("flags")
    keep = pc.and_(
        pc.and_(_has(flags, Flag.RECORD), _has(flags, Flag.FULLY_ALLOWED | Flag.DENIED)),
        pc.and_(
            pc.is_valid(table.column("principal")),
            pc.greater(pc.list_value_length(table.column("topics")), 0),
        ),
    )
    kept = table.filter(keep)
    topics = kept.column("topics")
    rows = pc.list_parent_indices(topics)
    part = kept.select(["principal", "ts_s", "flags"]).take(rows)
    flags, ts = part.column("flags"), part.column("ts_s").cast(pa.int64())
    allowed = _has(flags, Flag.FULLY_ALLOWED)
    api_bits = pc.bit_wise_and(flags, pa.scalar(int(API_BITS), flags.type)).cast(pa.int32())
    work = pa.table(
        {
            "principal": part.column("principal"),
            "hour": _hour(ts),
            "topic": pc.list_flatten(topics),
            "allowed": _count(allowed),
            "first": _when(allowed, ts),
            "last": _when(allowed, ts),
            "denied": _count(_has(flags, Flag.DENIED)),
        }
    )
    bits = {}
    for flag in (Flag.PRODUCE, Flag.FETCH, Flag.OTHER_API):
        used = pc.not_equal(pc.bit_wise_and(api_bits, pa.scalar(int(flag), pa.int32())), 0)
        bits[f"api{int(flag)}"] = _when(allowed, used)
    for name, column in bits.items():
        work = work.append_column(name, column)
    aggregates = [("allowed", "sum"), ("first", "min"), ("last", "max"), ("denied", "sum")]
    aggregates += [(name, "any") for name in bits]
    merged = work.group_by(["principal", "hour", "topic"], use_threads=False).aggregate(aggregates)
    apis = None
    for flag in (Flag.PRODUCE, Flag.FETCH, Flag.OTHER_API):
        one = pc.if_else(
            merged.column(f"api{int(flag)}_any"),
            pa.scalar(int(flag), pa.int32()),
            pa.scalar(0, pa.int32()),
        )
        apis = one if apis is None else pc.bit_wise_or(apis, one)
    return pa.table(
        {
            "principal": merged.column("principal"),
            "hour": merged.column("hour"),
            "topic": merged.column("topic"),
            "allowed": merged.column("allowed_sum"),
            "first": merged.column("first_min"),
            "last": merged.column("last_max"),
            "apis": apis,
            "denied": merged.column("denied_sum"),
        }
    )


def singles(table: Any) -> Any:
    """As :func:`.rollups.singles_frame`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flags = table.column("flags")
    failure = _has(flags, Flag.AUTH_FAILURE)
    admin = pc.and_(
        _has(flags, Flag.OTHER_API),
        pc.fill_null(pc.is_in(table.column("api"), pa.array(list(ADMIN_APIS))), False),
    )
    keep = pc.and_(
        _has(flags, Flag.RECORD), pc.or_(_has(flags, Flag.AUTH_FAILURE | Flag.THROTTLED), admin)
    )
    rows = table.filter(keep)
    flags, failure, admin = rows.column("flags"), failure.filter(keep), admin.filter(keep)
    kind = pc.if_else(failure, "auth_failure", pc.if_else(admin, "admin", "throttled"))
    who = pc.if_else(
        failure, pc.coalesce(rows.column("claimed_login"), rows.column("principal")),
        rows.column("principal"),
    )  # fmt: skip
    targets = pa.array(
        [
            (t or []) + (g or []) if a else None
            for t, g, a in zip(
                rows.column("topics").to_pylist(),
                rows.column("groups").to_pylist(),
                admin.to_pylist(),
                strict=True,
            )
        ],
        pa.list_(pa.string()),
    )
    allowed = pc.if_else(admin, _has(flags, Flag.ALLOWED), pa.scalar(True))
    return pa.table(
        {
            "ts_s": rows.column("ts_s").cast(pa.int64()),
            "kind": kind,
            "principal": who,
            "tenant": rows.column("tenant"),
            "client_host": rows.column("client_host"),
            "throttle_ms": rows.column("throttle_ms").cast(pa.int64()),
            "api": _when(admin, rows.column("api")),
            "targets": targets,
            "allowed": allowed,
        }
    )
