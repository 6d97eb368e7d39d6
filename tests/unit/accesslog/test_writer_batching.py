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


class SlowSink(BatchSink):
    """Each write takes ``seconds``; remembers when each batch was handed over."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.handed: list[float] = []

    async def write(self, entries: list[dict[str, Any]]) -> Drops:
        self.handed.append(asyncio.get_running_loop().time())
        self.batches.append(list(entries))
        await asyncio.sleep(self.seconds)
        return {}


async def test_records_queued_during_a_write_wait_for_the_next_batch_period() -> None:
    """A steady stream: one batch per ``batch_delay_s`` (not one per finished write), in
    order, none lost, and no record waits much longer than the delay."""
    loop = asyncio.get_running_loop()
    sink = SlowSink(0.005)
    delay = 0.05
    access = AccessLog([sink], queue_size=10_000, report_interval_s=3600, batch_delay_s=delay)
    task = asyncio.create_task(access.run())
    queued: list[float] = []
    start = loop.time()
    n = 0
    while loop.time() - start < 0.5:
        queued.append(loop.time())
        access.record({"n": n})
        n += 1
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.2)
    assert [e["n"] for batch in sink.batches for e in batch] == list(range(n))
    assert len(sink.batches) <= 0.5 / delay + 2  # a write each ~6 ms would be ~80
    gaps = [b - a for a, b in zip(sink.handed, sink.handed[1:], strict=False)]
    assert min(gaps) >= delay * 0.9
    first = 0
    for handed, batch in zip(sink.handed, sink.batches, strict=True):
        assert handed - queued[first] <= delay + 0.05  # slack for a busy test machine
        first += len(batch)
    await access.close()
    await task
