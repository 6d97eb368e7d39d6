"""The access log never stalls its callers: drops are counted, or backpressure is asked for."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.accesslog import build_access_log
from gateway.accesslog.settings import AccessLogConfig
from gateway.accesslog.sink import Drops, SinkError
from gateway.accesslog.writer import AccessLog


class GatedSink:
    """Writes only while ``gate`` is set: a stalled disk or topic."""

    def __init__(self, name: str = "file", open_: bool = False) -> None:
        self.name = name
        self.gate = asyncio.Event()
        if open_:
            self.gate.set()
        self.written: list[dict[str, Any]] = []
        self.fail_next = 0
        self.closed = False

    async def write(self, entries: list[dict[str, Any]]) -> Drops:
        await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise SinkError("disk on fire", written=1)
        self.written.extend(entries)
        return {}

    async def close(self) -> None:
        self.closed = True


def entries(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"n": i} for i in range(start, start + count)]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_drop_mode_counts_what_a_stalled_sink_cannot_take() -> None:
    sink = GatedSink()
    access = AccessLog([sink], queue_size=10, on_full="drop", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    loop = asyncio.get_running_loop()
    started = loop.time()
    results = [access.record(entry) for entry in entries(1000)]
    assert loop.time() - started < 0.5  # never waited for the sink
    assert all(results)  # drop mode never asks for backpressure
    await settle()
    stats = access.stats()["file"]
    assert stats.dropped == {"queue_full": 990}
    assert stats.queued == 10
    sink.gate.set()
    await access.close()
    await task
    assert [e["n"] for e in sink.written] == list(range(10))
    assert access.stats()["file"].written == 10
    assert access.dropped_total == 990
    assert sink.closed


async def test_dropped_records_are_reported_periodically(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kgw.accesslog")
    sink = GatedSink()
    access = AccessLog([sink], queue_size=5, on_full="drop", report_interval_s=0.05)
    task = asyncio.create_task(access.run())
    for entry in entries(25):
        access.record(entry)
    await asyncio.sleep(0.2)
    reports = [r for r in caplog.records if getattr(r, "event", None) == "accesslog_dropped"]
    assert len(reports) == 1  # one line for the burst, none while nothing more is dropped
    assert reports[0].__dict__["count"] == 20
    assert "file/queue_full: 20" in reports[0].getMessage()
    for entry in entries(3):
        access.record(entry)
    await asyncio.sleep(0.15)
    reports = [r for r in caplog.records if getattr(r, "event", None) == "accesslog_dropped"]
    assert [r.__dict__["count"] for r in reports] == [20, 3]
    sink.gate.set()
    await access.close()
    await task


async def test_block_mode_asks_for_backpressure_and_drops_nothing() -> None:
    sink = GatedSink()
    access = AccessLog([sink], queue_size=10, on_full="block", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    accepted = [access.record(entry) for entry in entries(10)]
    assert accepted[:9] == [True] * 9
    assert accepted[9] is False and access.over_capacity  # the 10th filled the queue
    # Requests already in flight still log; nothing is dropped, the queue overshoots.
    assert access.record({"n": 10}) is False
    resumed: list[str] = []
    access.when_ready(lambda: resumed.append("conn-1"))
    waiter = asyncio.create_task(access.wait_capacity())
    await settle()
    assert not waiter.done() and resumed == []
    sink.gate.set()
    await asyncio.wait_for(waiter, 2)
    assert resumed == ["conn-1"]
    assert not access.over_capacity
    assert access.record({"n": 11}) is True
    await access.close()
    await task
    assert [e["n"] for e in sink.written] == list(range(12))
    assert access.dropped_total == 0


async def test_when_ready_calls_back_at_once_when_there_is_room() -> None:
    access = AccessLog([GatedSink()], queue_size=10, on_full="block")
    called: list[int] = []
    access.when_ready(lambda: called.append(1))
    await settle()
    assert called == [1]
    await access.wait_capacity()


async def test_drop_mode_counts_failed_writes() -> None:
    sink = GatedSink(open_=True)
    sink.fail_next = 1
    access = AccessLog([sink], queue_size=100, on_full="drop", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    for entry in entries(5):
        access.record(entry)
    await access.close()
    await task
    stats = access.stats()["file"]
    assert stats.dropped == {"sink_error": 4}  # the first was written before the failure
    assert stats.written == 1


async def test_block_mode_retries_failed_writes() -> None:
    sink = GatedSink(open_=True)
    sink.fail_next = 2
    access = AccessLog([sink], queue_size=100, on_full="block", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    for entry in entries(5):
        access.record(entry)
    await access.close(timeout_s=5)
    await task
    assert access.dropped_total == 0
    assert [e["n"] for e in sink.written] == [2, 3, 4]  # 0 and 1 went before each failure
    assert access.stats()["file"].written == 5


async def test_a_stalled_sink_does_not_hold_up_another() -> None:
    files, topic = GatedSink("file", open_=True), GatedSink("topic")
    access = AccessLog([files, topic], queue_size=4, on_full="drop", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    for entry in entries(10):
        access.record(entry)
        await settle()
    assert len(files.written) == 10
    assert access.stats()["topic"].dropped == {"queue_full": 6}
    topic.gate.set()
    await access.close()
    await task


async def test_close_counts_what_a_stalled_sink_never_took() -> None:
    sink = GatedSink()
    access = AccessLog([sink], queue_size=100, on_full="block", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    for entry in entries(7):
        access.record(entry)
    await access.close(timeout_s=0.1)
    assert access.stats()["file"].dropped == {"shutdown": 7}
    assert access.record({"n": 99}) is True  # after close: counted, never raised
    assert access.stats()["file"].dropped == {"shutdown": 7, "closed": 1}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stop_event_ends_the_writer_after_the_queue_is_written() -> None:
    sink = GatedSink(open_=True)
    access = AccessLog([sink], queue_size=100)
    stop = asyncio.Event()
    task = asyncio.create_task(access.run(stop))
    for entry in entries(3):
        access.record(entry)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert len(sink.written) == 3


async def test_built_from_config_writes_json_lines(tmp_path: Path) -> None:
    config = AccessLogConfig(path=tmp_path / "access.log", max_bytes=65536, max_files=2)
    access = build_access_log(config)
    assert access is not None
    task = asyncio.create_task(access.run())
    access.record({"v": 1, "type": "connection", "event": "open"})
    await access.close()
    await task
    assert (tmp_path / "access.log").read_text() == ('{"v":1,"type":"connection","event":"open"}\n')
    assert build_access_log(AccessLogConfig(enabled=False)) is None


async def test_a_stalled_disk_holds_up_only_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real file sink with its write stuck (a hung disk): the loop runs on, drops counted."""
    import threading

    from gateway.accesslog.files import FileSink, RotatingFile

    disk = threading.Event()
    real = RotatingFile.write_lines

    def stuck(self: RotatingFile, lines: list[bytes]) -> dict[str, int]:
        disk.wait(10)
        return real(self, lines)

    monkeypatch.setattr(RotatingFile, "write_lines", stuck)
    sink = FileSink(tmp_path / "access.log", max_bytes=1 << 20, max_files=2)
    access = AccessLog([sink], queue_size=50, on_full="drop", report_interval_s=3600)
    task = asyncio.create_task(access.run())
    loop = asyncio.get_running_loop()
    for entry in entries(20):
        access.record(entry)
    await asyncio.sleep(0.05)  # the writer took a batch and is stuck in the thread
    started = loop.time()
    for entry in entries(200, start=20):
        access.record(entry)
        await asyncio.sleep(0)
    assert loop.time() - started < 1.0
    assert access.stats()["file"].dropped == {"queue_full": 170}
    disk.set()
    await access.close()
    await task
    written = (tmp_path / "access.log").read_text().splitlines()
    assert len(written) == 50 and access.stats()["file"].written == 50
