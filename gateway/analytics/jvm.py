"""Java options for the Spark driver of ``kgw analyze``: start fast, compile less.

A short Spark job on two cores spends as much CPU starting the JVM, loading classes
and JIT-compiling as on the records themselves (decision 0019 has the figures), so
the driver JVM gets:

- a class-data sharing archive (CDS): the first ``kgw analyze`` writes the classes it
  loaded to ``<cache>/spark-cds/<key>.jsa`` as its JVM exits
  (``-XX:ArchiveClassesAtExit``, about 180 MB, a second or two at exit); later runs,
  and the other Spark commands, map it (``-XX:SharedArchiveFile``) and start in about
  half the time. An archive holds only the classes its writer loaded, so only an
  analysis writes one (a simulation's would miss the analysis's classes). The key
  covers the Java binary, PySpark's version and jars, and these options, so a new JDK
  or Spark gets a new archive; a JVM that cannot use an archive runs without it
  (``-Xshare:auto``). ``KGW_SPARK_CDS=off`` turns the archive off; the cache root is
  ``$KGW_CACHE_DIR`` or ``~/.cache/kgw``.
- the throughput collector (``-XX:+UseParallelGC``): no concurrent G1 threads and
  write barriers competing with the tasks for two cores;
- a higher bar for the optimising compiler (C2): only the truly hot loops get the
  expensive compile, the rest stays at C1 code.

Only the driver JVM is touched; executors on a cluster keep the cluster's options.
``KGW_SPARK_JAVA_OPTIONS`` adds options after these (the later of two settings wins).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..fileutil import cache_root

log = logging.getLogger(__name__)

TUNING = (
    "-XX:+UseParallelGC",
    "-XX:Tier4InvocationThreshold=150000",
    "-XX:Tier4CompileThreshold=200000",
    "-XX:Tier4BackEdgeThreshold=1000000",
)
QUIET_CDS = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
STALE_TEMP_S = 3600.0  # a temporary archive older than this was left by a killed run
UNUSED_ARCHIVE_S = 14 * 86400.0  # archives of another JDK or Spark, unused this long, go


@dataclass(frozen=True, slots=True)
class DriverJvm:
    """The options for one driver JVM, and the archive it uses or writes."""

    options: tuple[str, ...]
    archive: Path | None = None  # mapped at start-up when it exists
    writing: Path | None = None  # written at exit, renamed to ``archive`` by ``finish``

    @property
    def java_options(self) -> str:
        return " ".join(self.options)


def java_binary(env: Mapping[str, str] | None = None) -> Path | None:
    """The java that Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    environ: Mapping[str, str] = os.environ if env is None else env
    home = environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_jars() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent / "jars"


def archive_key(java: Path, jars: Path | None) -> str:
    """A digest of what a CDS archive depends on: the JVM, Spark's jars, our options."""
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    if jars is not None and jars.is_dir():
        for jar in sorted(jars.iterdir()):
            digest.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    digest.update("\0".join(TUNING).encode())
    return digest.hexdigest()[:20]


def archive_path(
    cache_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> Path | None:
    """Where this machine's archive lives (whether written yet or not); ``None`` when
    the archive is turned off or there is no java."""
    environ: Mapping[str, str] = os.environ if env is None else env
    java = java_binary(environ)
    if environ.get("KGW_SPARK_CDS", "").lower() in ("off", "0", "no", "false") or java is None:
        return None
    return cache_root(cache_dir) / "spark-cds" / f"{archive_key(java, spark_jars())}.jsa"


def driver_jvm(
    cache_dir: Path | None = None, env: Mapping[str, str] | None = None, write: bool = True
) -> DriverJvm:
    """The driver's Java options, with the CDS archive to map, or (``write``) to write
    when there is none yet."""
    archive = archive_path(cache_dir, env)
    if archive is None:
        return DriverJvm(TUNING)
    directory = archive.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _tidy(directory)
        if archive.is_file() and archive.stat().st_size > 0:
            os.utime(archive)  # in use: keeps it from being tidied away
            return DriverJvm(
                (*TUNING, f"-XX:SharedArchiveFile={archive}", *QUIET_CDS), archive=archive
            )
        if not write:
            return DriverJvm(TUNING)
        writing = directory / f"{archive.stem}.{os.getpid()}.tmp"
        return DriverJvm(
            (*TUNING, f"-XX:ArchiveClassesAtExit={writing}", *QUIET_CDS),
            archive=archive,
            writing=writing,
        )
    except OSError as exc:
        log.warning("analytics.cds_unavailable", extra={"dir": str(directory), "error": str(exc)})
        return DriverJvm(TUNING)


def finish(jvm: DriverJvm) -> bool:
    """After the driver JVM has exited: keep the archive it wrote. True when one was kept."""
    if jvm.writing is None or jvm.archive is None:
        return False
    try:
        if jvm.writing.is_file() and jvm.writing.stat().st_size > 0:
            os.replace(jvm.writing, jvm.archive)
            return True
    except OSError as exc:
        log.warning("analytics.cds_not_kept", extra={"path": str(jvm.writing), "error": str(exc)})
    with contextlib.suppress(OSError):
        jvm.writing.unlink()
    return False


def _tidy(directory: Path) -> None:
    """Drop temporary archives of killed runs and archives nobody used for weeks."""
    now = time.time()
    for path in directory.iterdir():
        with contextlib.suppress(OSError):
            age = now - path.stat().st_mtime
            if (path.suffix == ".tmp" and age > STALE_TEMP_S) or (
                path.suffix == ".jsa" and age > UNUSED_ARCHIVE_S
            ):
                path.unlink()
