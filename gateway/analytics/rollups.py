"""The Spark side of ``kgw analyze``: three passes, collected as Arrow tables.

``principal_hours`` is the biggest: per principal, tenant, hour and address of the
successful logins and allowed requests, numeric sums only (the request counts, and
the lines, records and first and last second that bound the data, so no pass of its
own finds them); its Arrow table gives the bounds, the hourly rows and the
per-address rows. ``topic_hours`` explodes the topics of the fully allowed and the
denied requests, per principal, hour and topic: the denied topics of each hour and
each principal's first use of a topic come from it. ``singles`` keeps the failed
logins and throttled requests one by one. Grouping by hour, not by "before or in the
detection window", lets every pass start at once: the window is only known from the
bounds, and is applied to the hourly tables in Arrow. Each pass reads only the
columns it needs (Parquet column pruning). What a record is (request, allowed,
denied, login, API) is a bit test on its ``flags`` (:mod:`.flags`): no string
comparison per record when the Parquet stores the column (for JSON it is computed
once per record from the strings). Every result reaches the driver as an Arrow table, flat and
merged there, instead of as Row objects packed into arrays by another Spark
aggregation. The aggregations keep to numeric aggregates (a string ``max()`` would
make Spark sort every record).
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from . import flags
from .claimed import claimed_login
from .detect.newcomers import ADMIN_APIS
from .detect.rows import HOUR, HostRow, HourRow, Single, TopicRow
from .flags import Flag, has

# The record fields :func:`prepare` reads (with the flags' own, :func:`.flags.expression`):
# a reader that parses only these (``--follow``'s) gives it all it needs.
USED = (
    "ts",
    "type",
    "event",
    "outcome",
    "decision",
    "api",
    "throttle_ms",
    "principal",
    "claimed",
    "sasl_mechanism",
    "tenant",
    "client_host",
    "topics",
    "groups",
    "bytes_in",
    "bytes_out",
)


def prepare(frame: Any, flags_stored: bool | None = None) -> Any:
    """The columns the rollups use: the record's ``flags`` (:mod:`.flags`; see
    :func:`.flags.of` for ``flags_stored``), its second, who and where from (and whom a
    failed login claimed, :mod:`.claimed`), topics, throttle time and bytes."""
    from pyspark.sql import functions as F

    return frame.select(
        flags.of(frame, flags_stored).alias("flags"),
        F.unix_seconds("ts").alias("ts_s"),
        "principal",
        claimed_login().alias("claimed_login"),
        "tenant",
        "client_host",
        "api",
        F.coalesce(F.col("topics"), F.array().cast("array<string>")).alias("topics"),
        F.coalesce(F.col("groups"), F.array().cast("array<string>")).alias("groups"),
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
    """Per principal, tenant, hour and *good address*, numeric sums only (the biggest
    rollup, and the only pass over every record's who and where).

    ``lines``/``records``/``first``/``last`` give the bounds of the data, so no
    separate pass is needed for them; ``total``, ``allowed``, ``bytes`` and
    ``denied`` count the requests. ``host`` is the client address of the successful
    logins and allowed requests that have a principal and an address, null for every
    other record: the groups with a ``host`` are what :func:`host_rows` needs, by hour,
    so no pass waits for the detection window. Only numeric aggregates: Spark hashes,
    never sorts.
    """
    from pyspark.sql import functions as F

    col = F.col
    ok = has(Flag.RECORD)
    good = (
        has(Flag.AUTH_SUCCESS | Flag.ALLOWED)
        & col("principal").isNotNull()
        & col("client_host").isNotNull()
    )

    def count(flag: Flag, name: str) -> Any:
        return F.sum(F.when(has(flag), 1).otherwise(0)).cast("long").alias(name)

    host = F.when(good, col("client_host")).alias("host")
    return prepared.groupBy("principal", "tenant", _hour(), host).agg(
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


API_BITS = Flag.PRODUCE | Flag.FETCH | Flag.OTHER_API


def topic_hours(events: Any) -> Any:
    """Per principal, hour and topic of the fully allowed and the denied requests: the
    fully allowed ones (``allowed``), their first and last second and the APIs they
    used (``apis``, the :class:`.Flag` API bits), and the denied ones (``denied``).

    One pass serves the denied topics per hour (:func:`denied_topics`) and the first access
    to a topic (:func:`new_topic_rows`); by hour, so it does not wait for the window.
    A topic named twice in a request counts twice, as the request touched it twice."""
    from pyspark.sql import functions as F

    col = F.col
    allowed = has(Flag.FULLY_ALLOWED)
    return (
        events.where(
            has(Flag.FULLY_ALLOWED | Flag.DENIED)
            & col("principal").isNotNull()
            & (F.size("topics") > 0)
        )
        .select("ts_s", "principal", "flags", _hour(), F.explode("topics").alias("topic"))
        .groupBy("principal", "hour", "topic")
        .agg(
            F.sum(F.when(allowed, 1).otherwise(0)).cast("long").alias("allowed"),
            F.min(F.when(allowed, col("ts_s"))).alias("first"),
            F.max(F.when(allowed, col("ts_s"))).alias("last"),
            F.bit_or(F.when(allowed, col("flags").bitwiseAND(F.lit(int(API_BITS))))).alias("apis"),
            F.sum(F.when(has(Flag.DENIED), 1).otherwise(0)).cast("long").alias("denied"),
        )
    )


def hour_rows(groups: Any) -> list[HourRow]:
    """Per principal and hour, by principal then hour, from the Arrow table of
    ``principal_hours``: allowed, bytes, denied and total requests; a principal-hour seen
    under two tenants (or from several addresses) is one row, with the greater tenant
    name.

    No hash aggregation (Arrow's ``group_by`` on a string key took most of the time):
    the rows are sorted by principal, hour and tenant descending (nulls last), so each
    principal-hour is a run whose first row holds the greatest tenant, and each sum is
    the difference of a cumulative sum at the run's ends (wrapping arithmetic, so exact)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    counts = ("allowed", "bytes", "denied", "total")
    table = groups.select(["principal", "hour", "tenant", *counts])
    table = table.filter(
        pc.and_(pc.is_valid(table.column("principal")), pc.greater(table.column("total"), 0))
    )
    order = [("principal", "ascending"), ("hour", "ascending"), ("tenant", "descending")]
    table = table.sort_by(order).combine_chunks()
    if table.num_rows == 0:
        return []
    principal, hour = table.column("principal").chunk(0), table.column("hour").chunk(0)
    runs_end = pc.or_(
        pc.not_equal(principal[1:], principal[:-1]), pc.not_equal(hour[1:], hour[:-1])
    )
    last = pa.array([table.num_rows - 1], pa.int64())
    ends = pa.concat_arrays([pc.indices_nonzero(runs_end).cast(pa.int64()), last])
    starts = pa.concat_arrays([pa.array([0], pa.int64()), pc.add(ends[:-1], 1)])
    columns = [
        principal.take(starts).to_pylist(),
        hour.take(starts).to_pylist(),
        table.column("tenant").chunk(0).take(starts).to_pylist(),
    ]
    for name in counts:
        upto = pc.cumulative_sum(table.column(name).chunk(0)).take(ends)
        before = pa.concat_arrays([pa.array([0], upto.type), upto[:-1]])
        columns.append(pc.subtract(upto, before).to_pylist())
    # ``_make`` on zipped columns: the rows without a call per field (hundreds of thousands).
    return list(map(HourRow._make, zip(*columns, strict=True)))


def denied_topics(topics: Any) -> dict[tuple[str, int], tuple[str, ...]]:
    """Per principal and hour with denied requests, the distinct topics they named
    (sorted), from the Arrow table of ``topic_hours``."""
    import pyarrow.compute as pc

    denied = topics.filter(pc.greater(topics.column("denied"), 0)).sort_by(
        [("principal", "ascending"), ("hour", "ascending"), ("topic", "ascending")]
    )
    names_of: dict[tuple[str, int], list[str]] = {}
    for principal, hour, topic in zip(
        *(denied.column(name).to_pylist() for name in ("principal", "hour", "topic")),
        strict=True,
    ):
        names_of.setdefault((principal, hour), []).append(topic)
    return {key: tuple(names) for key, names in names_of.items()}


def singles_frame(events: Any, part: str = "all") -> Any:
    """Failed logins, throttled and administrative requests, one row each (a Spark frame;
    :func:`single_rows` turns its Arrow table into the detectors' rows).

    ``part`` ``"all"`` gives them all, as ``--follow`` wants them. The batch job asks
    for two parts the same rows make up: ``"logins"``, the failed logins and the
    throttled requests that are not administrative (the pass the first detectors wait
    for, which reads no ``topics`` or ``groups``: those array columns, decoded for every
    record, cost it a third of its time), and ``"admin"``, the administrative requests
    (throttled or not), which only the last detectors need, so their pass can run later.
    """
    from pyspark.sql import functions as F

    failure = has(Flag.AUTH_FAILURE)
    admin = has(Flag.OTHER_API) & F.col("api").isin(*ADMIN_APIS)
    wanted = {
        "all": has(Flag.AUTH_FAILURE | Flag.THROTTLED) | admin,
        "logins": failure | (has(Flag.THROTTLED) & ~admin),
        "admin": admin & ~failure,
    }
    if part not in wanted:
        raise ValueError(f"unknown part of the singles: {part!r}")
    if part == "logins":
        api, targets = F.lit(None).cast("string"), F.lit(None).cast("array<string>")
    else:
        api, targets = F.when(admin, F.col("api")), F.when(admin, F.concat("topics", "groups"))
    if part == "admin":
        # No failed login among them: the principal as logged, so this pass, which
        # decodes every record's columns, reads no ``claimed`` or ``sasl_mechanism``.
        kind, principal = F.lit("admin"), F.col("principal")
    else:
        kind = F.when(failure, "auth_failure").when(admin, "admin").otherwise("throttled")
        principal = F.when(failure, F.coalesce("claimed_login", "principal")).otherwise(
            F.col("principal")
        )
    return events.where(wanted[part]).select(
        "ts_s",
        kind.alias("kind"),
        principal.alias("principal"),
        "tenant",
        "client_host",
        "throttle_ms",
        api.alias("api"),
        targets.alias("targets"),
        F.when(admin, has(Flag.ALLOWED)).otherwise(F.lit(True)).alias("allowed"),
    )


SINGLE_ORDER = ("ts_s", "kind", "principal", "tenant", "client_host", "throttle_ms", "api")


def single_rows(table: Any) -> list[Single]:
    """The rows of :func:`singles_frame`'s Arrow table, in one order whatever order Spark
    (or the micro-batches of ``--follow``) delivered them in."""
    table = table.sort_by([(name, "ascending") for name in SINGLE_ORDER])
    columns: list[Any] = [column.to_pylist() for column in table.columns]
    targets, allowed = table.column("targets"), table.column("allowed")
    # Only administrative requests name targets: a column of nulls (the failed logins'
    # pass) is no list to walk; ``allowed`` is a bool column, converted only with nulls.
    if targets.null_count == len(targets):
        columns[7] = repeat((), len(targets))
    else:
        columns[7] = [tuple(names) if names else () for names in columns[7]]
    if allowed.null_count:
        columns[8] = [bool(value) for value in columns[8]]
    return list(map(Single._make, zip(*columns, strict=True)))


def singles(events: Any, part: str = "all") -> list[Single]:
    """Failed logins, throttled and administrative requests, one row each (``part`` as
    :func:`singles_frame`)."""
    return single_rows(singles_frame(events, part).toArrow())


def topic_users(topics: Any) -> dict[str, dict[str, int]]:
    """Per topic, each principal's first allowed use of it, from the Arrow table of
    ``topic_hours`` (the whole input: how long a topic has been in use, and by whom)."""
    import pyarrow.compute as pc

    allowed = topics.filter(pc.greater(topics.column("allowed"), 0))
    by_user = allowed.group_by(["topic", "principal"], use_threads=False)
    table = by_user.aggregate([("first", "min")])
    users: dict[str, dict[str, int]] = {}
    for topic, principal, first in zip(
        *(table.column(name).to_pylist() for name in ("topic", "principal", "first_min")),
        strict=True,
    ):
        users.setdefault(topic, {})[principal] = first
    return users


def _window(table: Any, detect_from: int) -> Any:
    """Whether each row's hour is in the detection window that starts at ``detect_from``.

    The job starts the window on the hour, or at the first record when that is later
    (then every hour is in it), so an hour is in it when it starts at or after the hour
    ``detect_from`` falls in. A window starting inside an hour after the first record
    is not one the hourly tables can give."""
    import pyarrow.compute as pc

    return pc.greater_equal(table.column("hour"), detect_from // HOUR * HOUR)


def host_rows(groups: Any, detect_from: int) -> list[HostRow]:
    """Per principal and address, from the Arrow table of ``principal_hours``:
    successful logins and allowed requests before and in the window, by principal then
    address."""
    import pyarrow as pa
    import pyarrow.compute as pc

    good = groups.filter(pc.is_valid(groups.column("host")))
    recent = _window(good, detect_from)
    records = good.column("records")
    zero = pa.scalar(0, records.type)
    table = (
        pa.table(
            {
                "principal": good.column("principal"),
                "host": good.column("host"),
                "base": pc.if_else(recent, zero, records),
                "seen": pc.if_else(recent, records, zero),
                "first": pc.if_else(recent, good.column("first"), None),
                "last": good.column("last"),
            }
        )
        .group_by(["principal", "host"], use_threads=False)
        .aggregate([("base", "sum"), ("seen", "sum"), ("first", "min"), ("last", "max")])
        .sort_by([("principal", "ascending"), ("host", "ascending")])
    )
    names = ("principal", "host", "base_sum", "seen_sum", "first_min", "last_max")
    return [
        HostRow(*values)
        for values in zip(*(table.column(name).to_pylist() for name in names), strict=True)
    ]


def new_topic_rows(topics: Any, detect_from: int) -> list[TopicRow]:
    """Topics each principal was first allowed to use in the detection window, from the
    Arrow table of ``topic_hours``, by principal then topic."""
    import pyarrow as pa
    import pyarrow.compute as pc

    allowed = topics.filter(pc.greater(topics.column("allowed"), 0))
    recent = _window(allowed, detect_from)
    apis = pc.if_else(recent, allowed.column("apis"), pa.scalar(0, allowed.column("apis").type))

    def used(flag: Flag) -> Any:
        return pc.not_equal(pc.bit_wise_and(apis, pa.scalar(int(flag), apis.type)), 0)

    counts = allowed.column("allowed")
    table = (
        pa.table(
            {
                "principal": allowed.column("principal"),
                "topic": allowed.column("topic"),
                "first": allowed.column("first"),
                "last": allowed.column("last"),
                "requests": pc.if_else(recent, counts, pa.scalar(0, counts.type)),
                "produce": used(Flag.PRODUCE),
                "fetch": used(Flag.FETCH),
                "other": used(Flag.OTHER_API),
            }
        )
        .group_by(["principal", "topic"], use_threads=False)
        .aggregate(
            [
                ("first", "min"),
                ("last", "max"),
                ("requests", "sum"),
                ("produce", "any"),
                ("fetch", "any"),
                ("other", "any"),
            ]
        )
    )
    table = table.filter(pc.greater_equal(table.column("first_min"), detect_from)).sort_by(
        [("principal", "ascending"), ("topic", "ascending")]
    )
    names = (
        "principal",
        "topic",
        "first_min",
        "last_max",
        "requests_sum",
        "produce_any",
        "fetch_any",
        "other_any",
    )
    return [
        TopicRow(*values)
        for values in zip(*(table.column(name).to_pylist() for name in names), strict=True)
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
