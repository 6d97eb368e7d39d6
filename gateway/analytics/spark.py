"""Starting Spark, and telling the user how far a long run has got.

PySpark is an optional dependency (``pip install 'kaas-gateway[analytics]'``);
``SparkUnavailable`` says what is missing (the package, or Java). Local mode uses
``local[2]`` unless ``--master`` names a cluster (``spark://``, ``yarn``, ``k8s://``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

from .jvm import DriverJvm, driver_jvm, finish

DEFAULT_MASTER = "local[2]"
_launched: DriverJvm | None = None  # the options of the driver JVM this process started
T = TypeVar("T")

# Spark's fair scheduler with two pools: while a job in FIRST has tasks waiting, they
# get the free cores before any job in LATER (its minimum share is never met, so it
# always comes first). ``kgw analyze`` runs the passes its detectors wait on longest in
# FIRST; jobs without a pool run in Spark's default pool.
FIRST, LATER = "kgw-first", "kgw-later"
LOOPBACK = "127.0.0.1"
POOLS = f"""<?xml version="1.0"?>
<allocations>
  <pool name="{FIRST}"><schedulingMode>FIFO</schedulingMode><weight>1000</weight>
    <minShare>1000000</minShare></pool>
  <pool name="{LATER}"><schedulingMode>FIFO</schedulingMode><weight>1</weight>
    <minShare>0</minShare></pool>
</allocations>
"""


class SparkUnavailable(RuntimeError):
    """Spark cannot start here; the message says what to install."""


def _cores(master: str) -> int:
    if master.startswith("local["):
        inner = master[6:-1]
        return (os.cpu_count() or 2) if inner == "*" else max(1, int(inner.split(",")[0]))
    return 8


def session(
    master: str = DEFAULT_MASTER,
    app_name: str = "kgw-analyze",
    driver_memory: str = "3g",
    conf: dict[str, str] | None = None,
    write_archive: bool = False,
) -> Any:
    """A SparkSession (an existing one is reused); UTC, quiet, no web UI, the fair
    scheduler with the pools :data:`FIRST` and :data:`LATER`, and in local mode a driver
    listening on loopback only.

    A new driver JVM gets the options of :mod:`.jvm`: it maps the class-data archive
    when there is one; with ``write_archive`` and none yet, it writes one as it exits,
    kept only if :func:`stop` ends the session (``kgw analyze`` does both, so the archive
    holds the classes of an analysis).
    """
    global _launched
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(
            "PySpark is not installed: pip install 'kaas-gateway[analytics]'"
        ) from None
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise SparkUnavailable("Spark needs Java 17 or later (no java on PATH, no JAVA_HOME)")
    # Spark's workers must run the same Python as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # py4j chats at INFO, even at interpreter exit when the log streams may be closed.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    shuffle = str(max(4, 2 * _cores(master)))
    jvm = driver_jvm(write=write_archive) if SparkContext._gateway is None else None
    extra = os.environ.get("KGW_SPARK_JAVA_OPTIONS", "").strip()  # later options win
    java_options = " ".join(
        part for part in ("-Dlog4j2.level=ERROR", jvm.java_options if jvm else "", extra) if part
    )
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.shuffle.partitions", shuffle)
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.files.maxPartitionBytes", str(16 << 20))
        # The rollups reach Python in a few large Arrow batches, not one per 10,000 rows
        # (every pyarrow call on them pays per chunk; decision 0031).
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.driver.extraJavaOptions", java_options)
    )
    if master.startswith("local"):
        # Spark's driver would otherwise listen (RPC, block transfers) on the address the
        # host name resolves to, or the first non-loopback interface; in local mode
        # nothing outside this machine needs to reach it.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config(
            "spark.driver.host", LOOPBACK
        )
    # Spark reads the pools as the context starts; the file is not needed after.
    with tempfile.TemporaryDirectory(prefix="kgw-spark-") as tmp:
        pools = Path(tmp) / "pools.xml"
        pools.write_text(POOLS)
        builder = builder.config("spark.scheduler.mode", "FAIR").config(
            "spark.scheduler.allocation.file", str(pools)
        )
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    if jvm is not None:
        _launched = jvm
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def in_pool(spark: Any, pool: str, action: Callable[[], T]) -> Callable[[], T]:
    """``action`` to run on a thread of its own, with its Spark jobs in ``pool``
    (:data:`FIRST` or :data:`LATER`). A pool is a property of the calling thread."""

    def run() -> T:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
        return action()

    return run


@contextlib.contextmanager
def running(
    master: str, app_name: str, driver_memory: str = "3g", write_archive: bool = False
) -> Iterator[Any]:
    """A session for one command, stopped (JVM and all) when the block ends."""
    spark = session(
        master, app_name=app_name, driver_memory=driver_memory, write_archive=write_archive
    )
    try:
        yield spark
    finally:
        stop(spark)


def stop(spark: Any, timeout_s: float = 120.0) -> None:
    """Stop Spark and the driver JVM this process started. A JVM writing the
    class-data archive is waited for and the archive kept; any other is left to finish
    exiting on its own (its shutdown hooks clean up), as PySpark does at exit."""
    global _launched
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None or process.stdin is None:
        return
    gateway.shutdown()
    process.stdin.close()  # Spark's gateway server exits when its stdin closes
    launched, writing = _launched, _launched is not None and _launched.writing is not None
    if writing:
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # a JVM that will not exit is killed
            process.kill()
            process.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if launched is not None and finish(launched):  # finish keeps only what was written
        logging.getLogger(__name__).info(
            "analytics.cds_archive_written", extra={"path": str(launched.archive)}
        )
    _launched = None


class Progress:
    """One line per stage on stderr: ``[analyze 12.3s] stage 2/7: ...``."""

    def __init__(self, name: str, stages: int, out: TextIO | None = None, quiet: bool = False):
        self.name = name
        self.stages = stages
        self.out = out if out is not None else sys.stderr
        self.quiet = quiet
        self.began = time.monotonic()
        self.done = 0
        self.timings: dict[str, float] = {}
        self._last = self.began
        self._stage = ""

    def stage(self, what: str) -> None:
        self._close()
        self.done += 1
        self._stage = what
        self.say(f"stage {self.done}/{self.stages}: {what}")

    def say(self, message: str) -> None:
        if not self.quiet:
            elapsed = time.monotonic() - self.began
            print(f"[{self.name} {elapsed:6.1f}s] {message}", file=self.out, flush=True)

    def _close(self) -> None:
        now = time.monotonic()
        if self._stage:
            self.timings[self._stage] = round(now - self._last, 3)
        self._last = now

    def finish(self) -> float:
        self._close()
        self._stage = ""
        total = time.monotonic() - self.began
        self.say(f"done in {total:.1f}s")
        return total
