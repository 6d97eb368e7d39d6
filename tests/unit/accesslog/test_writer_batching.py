"""``batch_delay_s`` (``accesslog.batch_delay_ms``): records of requests close in time go
to the sink in one batch, and nothing is lost to the wait (issue 16)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.accesslog.sink import Drops
from gateway.accesslog.writer import AccessLog


class BatchSink:
    name = "file"

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    async def write(self, entries: list[dict[str, Any]]) -> Drops:
        self.batches.append(list(entries))
        return {}

    async def close(self) -> None: ...


async def test_records_close_in_time_are_written_together() -> None:
    sink = BatchSink()
    access = AccessLog([sink], queue_size=1000, report_interval_s=3600, batch_delay_s=0.05)
    task = asyncio.create_task(access.run())
    await asyncio.sleep(0.01)  # the writer is waiting for a record
    for n in range(30):  # one record per loop iteration, as single requests arrive
        access.record({"n": n})
        await asyncio.sleep(0)
    await asyncio.sleep(0.2)
    assert [e["n"] for batch in sink.batches for e in batch] == list(range(30))
    assert len(sink.batches) == 1
    await access.close()
    await task


async def test_without_a_delay_each_wake_up_writes() -> None:
    sink = BatchSink()
    access = AccessLog([sink], queue_size=1000, report_interval_s=3600)
    task = asyncio.create_task(access.run())
    for n in range(5):
        access.record({"n": n})
        for _ in range(5):
            await asyncio.sleep(0)
    assert len(sink.batches) == 5
    await access.close()
    await task


async def test_close_during_the_delay_writes_everything() -> None:
    sink = BatchSink()
    access = AccessLog([sink], queue_size=1000, report_interval_s=3600, batch_delay_s=0.5)
    task = asyncio.create_task(access.run())
    for n in range(10):
        access.record({"n": n})
    await asyncio.sleep(0)
    await access.close(timeout_s=5)
    await task
    assert [e["n"] for batch in sink.batches for e in batch] == list(range(10))
    assert access.stats()["file"].written == 10 and access.dropped_total == 0
