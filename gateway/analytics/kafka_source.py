"""Spark's Kafka source for ``kgw analyze --follow``, fetched from Maven Central with ``mvn``.

``spark-sql-kafka-0-10`` at the version and Scala suffix of the installed PySpark,
with its runtime dependencies (the Kafka client, commons-pool2, the token provider),
is copied into ``${KGW_CACHE_DIR:-~/.cache/kgw}/spark-kafka-<spark>_<scala>/`` like
the broker's jars (:mod:`gateway.devstack.kafka_dist`): fetched into a temporary
directory, stamped, renamed into place. ``scripts/setup.sh`` fetches it
(``python -m gateway.analytics.kafka_source``); otherwise the first ``--follow`` does,
and says clearly what is missing when it cannot (no ``mvn``, offline).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from ..devstack.kafka_dist import _locked, _replace_dir, _tail
from ..fileutil import cache_root

log = logging.getLogger(__name__)
MARKER = ".kgw-complete"
MVN_TIMEOUT_S = 1200.0
_POM = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kgw</groupId>
  <artifactId>spark-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId>
      <artifactId>{artifact}</artifactId><version>{version}</version></dependency>
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>3.8.1</version>
  </plugin></plugins></build>
</project>
"""


class SourceUnavailable(RuntimeError):
    """The Kafka source's jars are not here and cannot be fetched; the message says why."""


def spark_coordinates() -> tuple[str, str]:
    """(Spark version, Scala binary version) of the installed PySpark."""
    try:
        import pyspark
    except ImportError:
        raise SourceUnavailable(
            "PySpark is not installed: pip install 'kaas-gateway[analytics]'"
        ) from None
    jars = Path(pyspark.__file__).parent / "jars"
    scala = "2.13"
    for jar in jars.glob("spark-sql_*.jar"):
        scala = jar.name.split("_", 1)[1].split("-", 1)[0]
        break
    return pyspark.__version__, scala


def artifact(scala: str) -> str:
    return f"spark-sql-kafka-0-10_{scala}"


def candidates(version: str) -> list[str]:
    """The source versions to try: PySpark's own, then (only when Maven Central has no
    release of it yet) the earlier patch releases and the previous minor's ``.0``.
    ``KGW_SPARK_KAFKA_VERSION`` pins one version."""
    pinned = os.environ.get("KGW_SPARK_KAFKA_VERSION")
    if pinned:
        return [pinned]
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return [version]
    major, minor, patch = (int(p) for p in parts)
    found = [f"{major}.{minor}.{p}" for p in range(patch, -1, -1)]
    if minor > 0:
        found.append(f"{major}.{minor - 1}.0")
    return found


def jars_dir(version: str, scala: str, cache_dir: Path | None = None) -> Path:
    return cache_root(cache_dir) / f"spark-kafka-{version}_{scala}"


def main_jar(directory: Path, version: str, scala: str) -> Path:
    return directory / f"{artifact(scala)}-{version}.jar"


def is_complete(directory: Path, version: str, scala: str) -> bool:
    return (directory / MARKER).is_file() and main_jar(directory, version, scala).is_file()


def _stem(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d+(\.\d+)*([.-][A-Za-z0-9]+)*\.jar$", "", jar)


def ensure_source(cache_dir: Path | None = None) -> list[Path]:
    """The jars to put on Spark's class path (``spark.jars``), fetched on first use:
    those of the source that PySpark does not already ship (no second Scala library,
    Hadoop client or compression codec on the class path)."""
    spark_version, scala = spark_coordinates()
    tried = candidates(spark_version)
    directory, used = None, spark_version
    for version in tried:
        if is_complete(jars_dir(version, scala, cache_dir), version, scala):
            directory, used = jars_dir(version, scala, cache_dir), version
            break
    errors: list[str] = []
    for version in tried if directory is None else ():
        where = jars_dir(version, scala, cache_dir)
        where.parent.mkdir(parents=True, exist_ok=True)
        try:
            with _locked(where.parent / f".{where.name}.lock"):
                if not is_complete(where, version, scala):
                    _fetch(where, version, scala)
        except SourceUnavailable as exc:
            errors.append(str(exc))
            if "not on PATH" in str(exc):
                break
            continue
        directory, used = where, version
        break
    if directory is None:
        raise SourceUnavailable("\n".join(errors))
    if used != spark_version:
        # Every start says so, not only the one that fetched it.
        log.warning(
            "analytics.kafka_source_version",
            extra={
                "spark": spark_version,
                "source": used,
                "detail": f"{artifact(scala)} {spark_version} is not on Maven Central; "
                f"using {used}, the newest earlier release it has "
                "(KGW_SPARK_KAFKA_VERSION pins a version)",
            },
        )
    import pyspark

    shipped = {_stem(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(j for j in directory.glob("*.jar") if _stem(j.name) not in shipped)


def source_note(jars: list[Path]) -> str | None:
    """A line saying which Kafka source :func:`ensure_source` gave, when it is not at
    the installed PySpark's version (None when it is)."""
    spark_version, scala = spark_coordinates()
    prefix = f"{artifact(scala)}-"
    for jar in jars:
        if jar.name.startswith(prefix) and jar.name.endswith(".jar"):
            used = jar.name[len(prefix) : -len(".jar")]
            if used != spark_version:
                return (
                    f"Spark's Kafka source {used} with PySpark {spark_version}: "
                    f"{artifact(scala)} {spark_version} is not on Maven Central "
                    "(KGW_SPARK_KAFKA_VERSION pins a version)"
                )
    return None


def _fetch(directory: Path, version: str, scala: str) -> None:
    mvn = os.environ.get("KGW_MVN") or shutil.which("mvn")
    if not mvn:
        raise SourceUnavailable(
            f"kgw analyze --follow needs Spark's Kafka source ({artifact(scala)} {version}) "
            "and 'mvn' is not on PATH to fetch it: install Maven (apt-get install maven) "
            "or run scripts/setup.sh while online"
        )
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=directory.parent))
    try:
        pom = tmp / "pom.xml"
        pom.write_text(_POM.format(artifact=escape(artifact(scala)), version=escape(version)))
        out = tmp / "jars"
        argv = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
        argv += [f"-DoutputDirectory={out}", "-DincludeScope=runtime"]
        try:
            proc = subprocess.run(
                argv, cwd=tmp, capture_output=True, timeout=MVN_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise SourceUnavailable(
                f"mvn did not fetch {artifact(scala)} {version} in {MVN_TIMEOUT_S:.0f}s"
            ) from None
        if proc.returncode != 0:
            tail = _tail((proc.stdout + proc.stderr).decode(errors="replace"), 15)
            raise SourceUnavailable(
                f"mvn could not fetch {artifact(scala)} {version} from Maven Central "
                f"(offline? run scripts/setup.sh while online):\n{tail}"
            )
        if not main_jar(out, version, scala).is_file():
            raise SourceUnavailable(f"mvn finished without {artifact(scala)}-{version}.jar")
        (out / MARKER).write_text(f"{artifact(scala)} {version}\n")
        _replace_dir(out, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        found = ensure_source()
    except SourceUnavailable as exc:
        print(f"kafka_source: {exc}", file=sys.stderr)
        sys.exit(1)
    print(found[0].parent if found else "")
