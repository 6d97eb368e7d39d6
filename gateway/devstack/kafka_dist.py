"""Fetch the pinned Apache Kafka jars from Maven Central with ``mvn``.

The jars land in a cache outside the repository,
``${KGW_CACHE_DIR:-~/.cache/kgw}/kafka-<version>/libs``. A fetch is written to
a temporary directory, stamped with a marker file and renamed into place, so a
half-finished fetch is never used. ``python -m gateway.devstack.kafka_dist``
fetches (when needed) and prints the directory.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from ..fileutil import cache_root

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.1.2"
"""Newest 4.1.x on Maven Central (kio's schemas are 4.1-era)."""

SCALA_BINARY = "2.13"

LOG4J_VERSION = "2.25.3"
"""Matches the log4j-core that kafka-server 4.1.2 depends on."""

MARKER = ".kgw-complete"

MVN_TIMEOUT_S = 1800.0

# (group, artifact, version, [excluded group:artifact, ...])
_Artifact = tuple[str, str, str, tuple[str, ...]]

ARTIFACTS: tuple[_Artifact, ...] = (
    # Broker (kafka.Kafka), StorageTool, ConfigCommand, DumpLogSegments; pulls in
    # clients, server, raft, metadata, storage, coordinators, scala, log4j-core.
    ("org.apache.kafka", f"kafka_{SCALA_BINARY}", KAFKA_VERSION, ()),
    # TopicCommand, Console{Producer,Consumer}, *Performance, AclCommand, ...
    # connect-runtime (jetty, jersey) only serves ConnectPluginPath: left out.
    (
        "org.apache.kafka",
        "kafka-tools",
        KAFKA_VERSION,
        (
            "org.apache.kafka:connect-runtime",
            "com.fasterxml.jackson.jakarta.rs:jackson-jakarta-rs-json-provider",
        ),
    ),
    # slf4j 1.7 (what Kafka uses) -> log4j2, so the JVMs log through log4j2 files.
    ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION, ()),
)

TOOL_HEAP = "512m"

TOOL_MAIN_CLASSES: dict[str, str] = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "producer-perf": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf": "org.apache.kafka.tools.ConsumerPerformance",
    "acls": "org.apache.kafka.tools.AclCommand",
    "configs": "kafka.admin.ConfigCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "groups": "org.apache.kafka.tools.GroupsCommand",
    "storage": "kafka.tools.StorageTool",
    "metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "dump-log": "kafka.tools.DumpLogSegments",
}
"""Friendly names (the ``kafka-<name>.sh`` scripts) to main classes in the 4.1 jars."""

_LOG4J = """\
status = warn
appender.out.type = {kind}
appender.out.name = out
{target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
"""

REQUIRED_JARS: tuple[str, ...] = (
    f"kafka_{SCALA_BINARY}-{KAFKA_VERSION}.jar",
    f"kafka-tools-{KAFKA_VERSION}.jar",
    f"kafka-clients-{KAFKA_VERSION}.jar",
    f"kafka-server-{KAFKA_VERSION}.jar",
    f"kafka-storage-{KAFKA_VERSION}.jar",
    f"log4j-core-{LOG4J_VERSION}.jar",
    f"log4j-slf4j-impl-{LOG4J_VERSION}.jar",
)


def libs_dir(cache_dir: Path | None = None) -> Path:
    """Where :func:`ensure_kafka` keeps the jars (whether or not fetched yet)."""
    return cache_root(cache_dir) / f"kafka-{KAFKA_VERSION}" / "libs"


_POM = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kgw</groupId>
  <artifactId>kafka-libs</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>3.8.1</version>
  </plugin></plugins></build>
</project>
"""


def render_pom() -> str:
    """The throw-away pom whose runtime dependencies are the jar set."""

    def coords(group: str, artifact: str) -> str:
        return f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"

    deps = []
    for group, artifact, version, exclusions in ARTIFACTS:
        excl = "".join(f"<exclusion>{coords(*ex.split(':', 1))}</exclusion>" for ex in exclusions)
        excl = f"<exclusions>{excl}</exclusions>" if excl else ""
        deps.append(
            f"    <dependency>{coords(group, artifact)}<version>{escape(version)}</version>"
            f"{excl}</dependency>"
        )
    return _POM.format(version=escape(KAFKA_VERSION), dependencies="\n".join(deps))


def _spec_digest() -> str:
    return hashlib.sha256(render_pom().encode()).hexdigest()


def is_complete(libs: Path) -> bool:
    """True when ``libs`` holds a finished fetch of the current jar set."""
    try:
        stamp = (libs / MARKER).read_text().split()
    except OSError:
        return False
    return (
        bool(stamp)
        and stamp[0] == _spec_digest()
        and all((libs / jar).is_file() for jar in REQUIRED_JARS)
    )


def ensure_kafka(cache_dir: Path | None = None) -> Path:
    """Return a directory holding every jar the broker and Kafka's tools need.

    Fetches with ``mvn`` on first use; afterwards only checks the marker file.
    Raises RuntimeError when mvn is missing or the fetch fails.
    """
    libs = libs_dir(cache_dir)
    if is_complete(libs):
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with _locked(libs.parent / ".lock"):
        if is_complete(libs):  # another process finished while we waited
            return libs
        for leftover in [*libs.parent.glob(".fetch-*"), *libs.parent.glob(".stale-*")]:
            shutil.rmtree(leftover, ignore_errors=True)  # from a killed fetch
        _fetch_into(libs)
    return libs


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fetch_into(libs: Path) -> None:
    mvn = os.environ.get("KGW_MVN") or shutil.which("mvn")
    if not mvn:
        raise RuntimeError(
            "cannot fetch Apache Kafka: 'mvn' (Apache Maven) is not on PATH; "
            "install it (Debian: apt-get install maven) or set KGW_MVN"
        )
    started = time.monotonic()
    log.info("fetching Apache Kafka %s jars with mvn into %s", KAFKA_VERSION, libs)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=libs.parent))
    try:
        pom = tmp / "pom.xml"
        pom.write_text(render_pom())
        out = tmp / "libs"
        argv = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
        argv += [f"-DoutputDirectory={out}", "-DincludeScope=runtime"]
        try:
            proc = subprocess.run(
                argv, cwd=tmp, capture_output=True, timeout=MVN_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"mvn did not finish fetching Apache Kafka {KAFKA_VERSION} "
                f"within {MVN_TIMEOUT_S:.0f}s"
            ) from exc
        if proc.returncode != 0:
            tail = _tail((proc.stdout + proc.stderr).decode(errors="replace"))
            raise RuntimeError(
                f"mvn failed (exit {proc.returncode}) fetching Apache Kafka {KAFKA_VERSION} "
                f"from Maven Central:\n{tail}"
            )
        missing = [jar for jar in REQUIRED_JARS if not (out / jar).is_file()]
        if missing:
            raise RuntimeError(f"mvn finished but these jars are missing: {missing}")
        (out / MARKER).write_text(f"{_spec_digest()}\nkafka {KAFKA_VERSION}\n")
        _replace_dir(out, libs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info(
        "fetched %d jars for Apache Kafka %s in %.1fs",
        sum(1 for _ in libs.glob("*.jar")),
        KAFKA_VERSION,
        time.monotonic() - started,
    )


def _replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` to ``target``, moving a stale ``target`` out of the way first."""
    if target.exists():
        stale = target.with_name(f".stale-{os.getpid()}-{target.name}")
        target.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    new.rename(target)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def java_classpath(libs: Path) -> str:
    """A ``java -cp`` value for every jar in ``libs`` (the JVM expands the ``*``)."""
    return str(libs / "*")


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` from PATH; RuntimeError if neither."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise RuntimeError(
            "cannot run Apache Kafka: 'java' (17 or newer) is not on PATH and JAVA_HOME "
            "is unset; install it (Debian: apt-get install openjdk-17-jre-headless)"
        )
    return java


def random_uuid() -> str:
    """A new Kafka Uuid (url-safe base64, no padding), as ``kafka-storage random-uuid``."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka rejects ids that look like options
            return text


def formatted_cluster_id(log_dir: Path) -> str | None:
    """The cluster id a formatted log dir belongs to (from ``meta.properties``), if any."""
    try:
        found = re.search(r"^cluster\.id=(\S+)", (log_dir / "meta.properties").read_text(), re.M)
    except OSError:
        return None
    return found.group(1) if found else None


def jvm_argv(
    libs: Path,
    main_class: str,
    args: Sequence[str],
    *,
    heap: str = TOOL_HEAP,
    log4j_config: Path | None = None,
    jvm_opts: Sequence[str] = (),
) -> list[str]:
    """``java ... -cp <libs>/* <main_class> <args>``, logging WARN+ to stderr by default."""
    config = log4j_config if log4j_config is not None else tools_log4j_config()
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={config}",
        *jvm_opts,
        "-cp",
        java_classpath(libs),
        main_class,
        *args,
    ]


def tool_main_class(tool: str) -> str:
    """The main class behind a friendly tool name; a dotted class name passes through."""
    if tool in TOOL_MAIN_CLASSES:
        return TOOL_MAIN_CLASSES[tool]
    if "." in tool:
        return tool
    raise ValueError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOL_MAIN_CLASSES))}")


def tool_argv(tool: str, args: Sequence[str], libs: Path | None = None) -> list[str]:
    """The command line running one of Kafka's Java tools, e.g. ``tool_argv("topics", [...])``.

    Nothing about a cluster is assumed: pass ``--bootstrap-server`` yourself.
    """
    return jvm_argv(libs if libs is not None else ensure_kafka(), tool_main_class(tool), args)


def run_tool(
    tool: str,
    args: Sequence[str],
    *,
    libs: Path | None = None,
    timeout: float = 300,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a Kafka tool to completion, capturing stdout/stderr; the caller checks the exit code."""
    argv = tool_argv(tool, args, libs)
    log.debug("running kafka tool %s %s", tool, " ".join(args))
    return subprocess.run(
        argv,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def write_log4j_config(path: Path, log_file: str | None = None) -> Path:
    """Write (when changed) a log4j2 config: WARN+ to ``log_file``, else to stderr.

    ``log_file`` may use lookups such as ``${sys:kafka.logs.dir}/server.log``.
    """
    if log_file is None:
        text = _LOG4J.format(kind="Console", target="appender.out.target = SYSTEM_ERR")
    else:
        text = _LOG4J.format(kind="File", target=f"appender.out.fileName = {log_file}")
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def tools_log4j_config(cache_dir: Path | None = None) -> Path:
    """The tools' log4j2 config (WARN+ to stderr, so stdout carries only tool output)."""
    return write_log4j_config(cache_root(cache_dir) / "log4j2-tools.properties")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        libs = ensure_kafka()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(libs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
