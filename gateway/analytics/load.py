"""Reading access logs into Spark, in JSON lines or Parquet, and converting between them.

Every reader returns the same columns (``records.FIELDS``) with ``ts`` as a UTC
timestamp; a field missing from older files comes back null, a line that is not
a record of the schema is skipped and counted. Parquet written here (``write_parquet``:
``kgw analyze convert`` and the bulk simulator) is partitioned by day, keeps ``ts`` as
microseconds since the epoch (``TIMESTAMP_MICROS``, not the legacy INT96) and adds the
records' ``kgw_flags_v1`` (:mod:`.flags`); reading keeps that column too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import flags
from .records import FIELDS

# Spark SQL types of the schema's fields (``ts`` is read as text, then parsed).
TYPES: dict[str, str] = {
    "v": "int",
    "ts": "string",
    "client_port": "int",
    "api_version": "int",
    "correlation_id": "int",
    "topics": "array<string>",
    "groups": "array<string>",
    "transactional_ids": "array<string>",
    "denied": "array<string>",
    "partitions": "int",
    "error_code": "int",
    "bytes_in": "bigint",
    "bytes_out": "bigint",
    "records": "bigint",
    "throttle_ms": "bigint",
    "latency_ms": "double",
}
JSON_SUFFIXES = (".jsonl", ".json", ".log", ".jsonl.gz", ".json.gz", ".log.gz")


class LogInputError(ValueError):
    """The input cannot be read as access logs; the message says why."""


def ddl() -> str:
    return ", ".join(f"`{name}` {TYPES.get(name, 'string')}" for name in FIELDS)


def detect_format(paths: Sequence[str]) -> str:
    """``parquet`` when the inputs hold Parquet files, else ``json``."""
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            return "parquet" if path.suffix == ".parquet" else "json"
        if not path.exists():
            if "://" in raw:  # hdfs://, s3a://: trust the name
                return "parquet" if "parquet" in raw else "json"
            raise LogInputError(f"{raw}: no such file or directory")
        if next(path.rglob("*.parquet"), None) is not None:
            return "parquet"
    return "json"


def _json_files(paths: Sequence[str]) -> list[str]:
    files: list[str] = []
    for raw in paths:
        path = Path(raw)
        if "://" in raw or path.is_file():
            files.append(raw)
            continue
        found = sorted(
            str(f)
            for f in path.rglob("*")
            if f.is_file()
            and not f.name.startswith((".", "_"))
            and (f.name.endswith(JSON_SUFFIXES) or _rotated(f.name))
        )
        files.extend(found)
    if not files:
        raise LogInputError(f"no access-log files (*.jsonl, *.log, rotated *.N) in {list(paths)}")
    return files


def _rotated(name: str) -> bool:
    """``access.log.3`` and ``access.jsonl.2``: a rotating writer's older files."""
    stem, _, number = name.rpartition(".")
    return number.isdigit() and stem.endswith(JSON_SUFFIXES)


def read_logs(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """The records in ``paths`` with the schema's columns; ``ts`` a timestamp, bad rows dropped."""
    from pyspark.sql import functions as F

    if fmt == "auto":
        fmt = detect_format(paths)
    if fmt == "json":
        raw = spark.read.schema(ddl()).option("mode", "PERMISSIVE").json(_json_files(paths))
    elif fmt == "parquet":
        raw = spark.read.option("mergeSchema", "true").parquet(*paths)
    else:
        raise LogInputError(f"unknown input format {fmt!r} (json, parquet or auto)")
    columns = []
    present = set(raw.columns)
    for name in FIELDS:
        sql_type = "timestamp" if name == "ts" else TYPES.get(name, "string")
        if name not in present:
            columns.append(F.lit(None).cast(sql_type).alias(name))
        elif name == "ts":
            ts_type = dict(raw.dtypes)["ts"]
            ts = F.col("ts") if ts_type == "timestamp" else F.try_to_timestamp(F.col("ts"))
            columns.append(ts.alias("ts"))
        else:
            columns.append(F.col(name).cast(sql_type).alias(name))
    if flags.COLUMN in present:
        columns.append(F.col(flags.COLUMN).cast("int").alias(flags.COLUMN))
    return raw.select(*columns)


def usable(frame: Any) -> Any:
    """Rows that are records of the schema (a time and a type)."""
    return frame.where(flags.is_record())


def convert(spark: Any, paths: Sequence[str], out: str, fmt: str = "auto") -> tuple[int, int]:
    """Write the logs as Parquet partitioned by day; (records written, lines skipped)."""
    frame = read_logs(spark, paths, fmt)
    write_parquet(usable(frame), out)
    written = spark.read.parquet(out).count()
    total = frame.count()
    return written, total - written


RECORDS_PER_FILE = 1_000_000  # a file is a task when analysed: several per day, even ones


def write_parquet(records: Any, out: str) -> None:
    """Records of the schema as Parquet, partitioned by day, with their flags; ``out``
    is replaced. Timestamps as ``TIMESTAMP_MICROS`` (set for every session in
    :func:`.spark.session`).

    Within a day the records are sorted by principal, then time, and each file holds a
    range of principals: the files are about a quarter smaller than time-ordered ones
    (runs of the same principal, tenant and address compress well), and a principal's
    hours of a day come from one file, so each task's aggregation table stays small.
    """
    from pyspark.sql import functions as F

    (
        records.select(
            *FIELDS,
            flags.expression().alias(flags.COLUMN),
            F.date_format("ts", "yyyy-MM-dd").alias("day"),
        )
        .repartitionByRange("day", "principal")
        .sortWithinPartitions("day", "principal", "ts")
        .write.mode("overwrite")
        .option("maxRecordsPerFile", RECORDS_PER_FILE)
        .partitionBy("day")
        .parquet(out)
    )
