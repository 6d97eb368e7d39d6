"""Rotating JSON-lines files stay within their size and count bounds."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gateway.accesslog.files import FileSink, RotatingFile, encode_line
from gateway.accesslog.sink import SinkError


def lines(count: int, size: int = 100) -> list[bytes]:
    return [encode_line({"n": i, "pad": "x" * (size - 20)}) for i in range(count)]


def all_lines(rotating: RotatingFile) -> list[dict[str, object]]:
    found = []
    for path in reversed(rotating.files()):  # oldest first
        found.extend(json.loads(line) for line in path.read_bytes().splitlines())
    return found


def test_files_stay_within_size_and_count(tmp_path: Path) -> None:
    rotating = RotatingFile(tmp_path / "access.log", max_bytes=1000, max_files=3)
    batch = lines(200)
    assert rotating.write_lines(batch) == {}
    files = rotating.files()
    assert [p.name for p in files] == ["access.log", "access.log.1", "access.log.2"]
    assert all(p.stat().st_size <= 1000 for p in files)
    assert sum(p.stat().st_size for p in files) <= 3 * 1000
    kept = all_lines(rotating)
    numbers = [entry["n"] for entry in kept]
    assert numbers == list(range(200 - len(kept), 200))  # the newest, in order, none split
    assert len(kept) >= 2 * (1000 // len(batch[0]))  # full rotated files


def test_each_file_is_filled_before_rotating(tmp_path: Path) -> None:
    rotating = RotatingFile(tmp_path / "a.log", max_bytes=1000, max_files=5)
    line_size = len(lines(1)[0])
    for line in lines(30):
        rotating.write_lines([line])
    sizes = [p.stat().st_size for p in rotating.files()[1:]]
    assert all(1000 - line_size < size <= 1000 for size in sizes)


def test_one_file_only_is_replaced(tmp_path: Path) -> None:
    rotating = RotatingFile(tmp_path / "a.log", max_bytes=500, max_files=1)
    rotating.write_lines(lines(50))
    assert [p.name for p in rotating.files()] == ["a.log"]
    assert (tmp_path / "a.log").stat().st_size <= 500


def test_a_line_larger_than_a_file_is_counted_not_written(tmp_path: Path) -> None:
    rotating = RotatingFile(tmp_path / "a.log", max_bytes=300, max_files=2)
    small = lines(2)
    drops = rotating.write_lines([small[0], encode_line({"pad": "y" * 400}), small[1]])
    assert drops == {"too_large": 1}
    assert [entry["n"] for entry in all_lines(rotating)] == [0, 1]


def test_reopening_appends_and_respects_the_existing_size(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    first = RotatingFile(path, max_bytes=1000, max_files=3)
    first.write_lines(lines(5))
    first.close()
    second = RotatingFile(path, max_bytes=1000, max_files=3)
    second.write_lines(lines(8))
    assert path.stat().st_size <= 1000
    assert len(all_lines(second)) == 13


def test_files_beyond_a_lowered_count_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    for index in (1, 2, 3, 7):
        path.with_name(f"a.log.{index}").write_text("old\n")
    (tmp_path / "a.log.other").write_text("not ours\n")
    rotating = RotatingFile(path, max_bytes=1000, max_files=2)
    rotating.write_lines(lines(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log", "a.log.1", "a.log.other"]


def test_files_are_not_world_readable(tmp_path: Path) -> None:
    rotating = RotatingFile(tmp_path / "logs" / "a.log", max_bytes=1000, max_files=2)
    rotating.write_lines(lines(1))
    mode = (tmp_path / "logs" / "a.log").stat().st_mode
    assert not mode & stat.S_IROTH


def test_an_unwritable_directory_raises_sink_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    rotating = RotatingFile(blocker / "a.log", max_bytes=1000, max_files=2)
    with pytest.raises(SinkError) as caught:
        rotating.write_lines(lines(3))
    assert caught.value.written == 0


async def test_file_sink_writes_on_its_thread(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "a.log", max_bytes=10_000, max_files=2)
    assert await sink.write([{"a": 1}, {"b": "é"}]) == {}
    await sink.close()
    assert (tmp_path / "a.log").read_text(encoding="utf-8") == '{"a":1}\n{"b":"é"}\n'
