"""What each access-log record is, as bits of one integer: computed once, tested cheaply.

The rollups ask of every record whether it is a request, allowed, denied, a failed or
successful login, throttled, and which kind of API. Asked of the strings (``type``,
``decision``, ``event``, ``outcome``, ``api``) that costs a string decode and compare
per record and question; asked of ``kgw_flags_v1`` it is a bit test. ``kgw analyze
convert`` and the bulk simulator store the column in the Parquet they write; for
JSON lines, or Parquet written without it, the job computes it from the strings with
the same expression. A new meaning of the bits gets a new column name.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntFlag
from pathlib import Path
from typing import Any

COLUMN = "kgw_flags_v1"
ALLOWED = ("allow", "none", "partial")  # partial: some parts were allowed
DENIED = ("deny", "partial")
FULLY_ALLOWED = ("allow", "none")


class Flag(IntFlag):
    RECORD = 1  # a record of the schema: a time and a type
    REQUEST = 2
    ALLOWED = 4  # a request with a decision in ALLOWED
    DENIED = 8  # a request with a decision in DENIED
    AUTH_FAILURE = 16
    AUTH_SUCCESS = 32
    THROTTLED = 64  # a request with throttle_ms > 0
    PRODUCE = 128
    FETCH = 256
    OTHER_API = 512  # a request naming another API
    FULLY_ALLOWED = 1024  # a request with a decision in FULLY_ALLOWED


def is_record() -> Any:
    """A record of the schema: a time and a type (the rest are unreadable lines)."""
    from pyspark.sql import functions as F

    return F.col("ts").isNotNull() & F.col("type").isin("request", "connection")


def expression() -> Any:
    """The flags of a record, from the schema's columns (nulls make a bit 0)."""
    from pyspark.sql import functions as F

    col = F.col
    record = is_record()
    request = record & (col("type") == "request")
    auth = record & (col("event") == "auth")
    api = request & col("api").isNotNull()
    bits = (
        (record, Flag.RECORD),
        (request, Flag.REQUEST),
        (request & col("decision").isin(*ALLOWED), Flag.ALLOWED),
        (request & col("decision").isin(*DENIED), Flag.DENIED),
        (auth & (col("outcome") == "failure"), Flag.AUTH_FAILURE),
        (auth & (col("outcome") == "success"), Flag.AUTH_SUCCESS),
        (request & (col("throttle_ms") > 0), Flag.THROTTLED),
        (request & (col("api") == "produce"), Flag.PRODUCE),
        (request & (col("api") == "fetch"), Flag.FETCH),
        (api & ~col("api").isin("produce", "fetch"), Flag.OTHER_API),
        (request & col("decision").isin(*FULLY_ALLOWED), Flag.FULLY_ALLOWED),
    )
    total = F.lit(0)
    for condition, flag in bits:
        total = total.bitwiseOR(F.when(condition, F.lit(int(flag))).otherwise(F.lit(0)))
    return total.cast("int")


def of(frame: Any, stored: bool | None = None) -> Any:
    """The flags column of ``frame``: the stored one when every file has it, else
    computed where missing.

    A stored column alone saves the scans from reading the five string columns the
    expression needs (about a third of each pass's CPU), which a ``coalesce`` with the
    expression would read anyway. ``stored`` is whether every file has the column
    (:func:`stored_in`); ``None`` asks Spark, a cheap query since Parquet's null counts
    let the reader skip every row group that has flags throughout.
    """
    from pyspark.sql import functions as F

    if COLUMN not in frame.columns:
        return expression()
    if stored is None:
        stored = frame.where(F.col(COLUMN).isNull()).limit(1).count() == 0
    return F.col(COLUMN) if stored else F.coalesce(F.col(COLUMN), expression())


def stored_in(paths: Sequence[str]) -> bool | None:
    """Whether every Parquet file under ``paths`` has the flags column, from the files'
    footers (milliseconds where a query would take a second); ``None`` for paths that
    are not local files (``hdfs://``, ``s3a://``)."""
    import pyarrow.parquet as pq

    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if "://" in raw or not path.exists():
            return None
        files.extend([path] if path.is_file() else sorted(path.rglob("*.parquet")))
    try:
        return bool(files) and all(COLUMN in pq.read_schema(f).names for f in files)
    except (OSError, ValueError):  # unreadable here: let Spark decide (and report)
        return None


def has(flag: Flag) -> Any:
    """True where any bit of ``flag`` is set in the ``flags`` column of the rollups."""
    from pyspark.sql import functions as F

    return F.col("flags").bitwiseAND(F.lit(int(flag))) != 0
