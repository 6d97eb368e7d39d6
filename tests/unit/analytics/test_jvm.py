"""The driver JVM's options: when a class-data archive is used, written, kept or dropped."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gateway.analytics import jvm


@pytest.fixture
def java(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    return {"JAVA_HOME": str(home)}


def test_first_run_writes_an_archive_that_later_runs_map(
    tmp_path: Path, java: dict[str, str]
) -> None:
    first = jvm.driver_jvm(tmp_path / "cache", java)
    assert first.writing is not None and first.archive is not None
    assert f"-XX:ArchiveClassesAtExit={first.writing}" in first.options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in first.options)
    first.writing.write_bytes(b"archive")  # what the JVM leaves as it exits
    assert jvm.finish(first)
    assert first.archive.read_bytes() == b"archive" and not first.writing.exists()

    second = jvm.driver_jvm(tmp_path / "cache", java)
    assert second.writing is None
    assert f"-XX:SharedArchiveFile={first.archive}" in second.options
    assert not jvm.finish(second)  # nothing to keep


def test_a_run_that_wrote_nothing_keeps_nothing(tmp_path: Path, java: dict[str, str]) -> None:
    run = jvm.driver_jvm(tmp_path, java)
    assert run.writing is not None and run.archive is not None
    run.writing.write_bytes(b"")  # a JVM killed while dumping
    assert not jvm.finish(run)
    assert not run.archive.exists() and not run.writing.exists()


def test_a_new_jdk_gets_a_new_archive(tmp_path: Path, java: dict[str, str]) -> None:
    before = jvm.driver_jvm(tmp_path, java).archive
    binary = Path(java["JAVA_HOME"]) / "bin" / "java"
    binary.write_text("#!/bin/sh\n# upgraded\n")
    after = jvm.driver_jvm(tmp_path, java).archive
    assert before is not None and after is not None and before != after


def test_off_switch_and_no_java_leave_only_the_tuning(tmp_path: Path, java: dict[str, str]) -> None:
    assert jvm.driver_jvm(tmp_path, {**java, "KGW_SPARK_CDS": "off"}).options == jvm.TUNING
    assert jvm.driver_jvm(tmp_path, {"JAVA_HOME": str(tmp_path / "none")}).options == jvm.TUNING
    assert not (tmp_path / "spark-cds").exists()


def test_stale_temporaries_and_unused_archives_are_tidied(
    tmp_path: Path, java: dict[str, str]
) -> None:
    directory = tmp_path / "spark-cds"
    directory.mkdir()
    stale, fresh, unused = directory / "a.1.tmp", directory / "b.2.tmp", directory / "old.jsa"
    for path in (stale, fresh, unused):
        path.write_bytes(b"x")
    long_ago = time.time() - jvm.UNUSED_ARCHIVE_S - 60
    os.utime(stale, (long_ago, long_ago))
    os.utime(unused, (long_ago, long_ago))
    jvm.driver_jvm(tmp_path, java)
    assert fresh.exists() and not stale.exists() and not unused.exists()


def test_an_unwritable_cache_falls_back_to_no_archive(tmp_path: Path, java: dict[str, str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert jvm.driver_jvm(blocker, java).options == jvm.TUNING


def test_only_a_writer_writes_an_archive(tmp_path: Path, java: dict[str, str]) -> None:
    reader = jvm.driver_jvm(tmp_path, java, write=False)
    assert reader.options == jvm.TUNING and reader.writing is None
    writer = jvm.driver_jvm(tmp_path, java)
    assert writer.writing is not None and writer.archive is not None
    writer.writing.write_bytes(b"archive")
    assert jvm.finish(writer)
    assert (
        f"-XX:SharedArchiveFile={writer.archive}"
        in jvm.driver_jvm(tmp_path, java, write=False).options
    )
