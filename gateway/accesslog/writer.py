"""The access log: a non-blocking ``record`` for the event loop, a writer task per sink.

``record(entry)`` appends to one bounded queue per sink and returns at once; it
never awaits and never raises. Each sink's queue is drained by its own writer
(so a stalled topic never holds up the files). What happens when a queue is full
depends on ``on_full``:

``drop``
    the record is not queued for that sink and is counted
    (``dropped[sink]["queue_full"]``); a sink whose write fails has that batch
    counted as ``sink_error``. ``record`` always returns True.
``block``
    nothing is dropped. The record is queued anyway and ``record`` returns False:
    the caller must stop reading new requests (pause the transport) until
    ``when_ready`` calls back or ``wait_capacity`` returns, which happens once
    every queue is down to half its size. The queue overshoots its size only by
    the records of requests already in flight. A failed write is retried (with
    backoff) instead of dropped, so the file or topic may see a batch twice.

Counts are kept per sink and reason (``stats``), exposed as metrics and reported
every ``report_interval_s`` in one ``accesslog_dropped`` log line while they grow.

``batch_delay_s``: a writer woken by a record waits this long before it takes its
batch, so that the records of requests close in time go to the sink together (one
hand-off to the file thread for many records instead of one each), and records
queued while a batch was being written wait until ``batch_delay_s`` after that batch
was taken: at most one batch per ``batch_delay_s`` while the sink keeps up. Not when
a batch is full already, when ``block`` mode is holding readers back, or at close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .pending import Queued
from .sink import Sink, SinkError

log = logging.getLogger("kgw.accesslog")
OnFull = Literal["drop", "block"]
BATCH_MAX = 2048
RETRY_MAX_S = 5.0


@dataclass
class SinkStats:
    """Totals for one sink since start."""

    written: int = 0
    queued: int = 0
    dropped: dict[str, int] = field(default_factory=dict)


class _Channel:
    """One sink with its queue and counters."""

    def __init__(self, sink: Sink, capacity: int) -> None:
        self.sink = sink
        self.capacity = capacity
        self.resume_at = capacity // 2
        self.queue: deque[Queued] = deque()
        self.written = 0
        self.dropped: Counter[str] = Counter()
        self.wake = asyncio.Event()
        self.failing: str | None = None

    def take(self, count: int) -> None:
        for _ in range(count):
            self.queue.popleft()


class AccessLog:
    """Bounded, counted, off-the-data-path access logging to one or more sinks."""

    def __init__(
        self,
        sinks: Sequence[Sink],
        queue_size: int,
        on_full: OnFull = "drop",
        report_interval_s: float = 10.0,
        queue_sizes: dict[str, int] | None = None,
        batch_delay_s: float = 0.0,
    ) -> None:
        sizes = queue_sizes or {}
        self.batch_delay_s = batch_delay_s
        self._channels = [_Channel(s, sizes.get(s.name, queue_size)) for s in sinks]
        self.block = on_full == "block"
        self.report_interval_s = report_interval_s
        self._over = False
        self._waiters: list[Callable[[], None]] = []
        self._closing = False
        self._closed = False
        self._reported: Counter[tuple[str, str]] = Counter()
        self._finished = asyncio.Event()

    # -- the event loop's side ------------------------------------------------------

    def record(self, entry: Queued) -> bool:
        """Queue ``entry`` (which the log now owns) for every sink. Never blocks or raises.
        A ``PendingRequest`` is built into its record by the sinks (``pending.entry_of``).

        False only with ``on_full: block`` when a queue is at its size: pause reading.
        """
        try:
            if self._closed:
                for channel in self._channels:
                    channel.dropped["closed"] += 1
                return True
            for channel in self._channels:
                queue = channel.queue
                if len(queue) >= channel.capacity and not self.block:
                    channel.dropped["queue_full"] += 1
                    continue
                queue.append(entry)
                if self.block and len(queue) >= channel.capacity:
                    self._over = True
                if not channel.wake.is_set():
                    channel.wake.set()
            return not self._over
        except Exception:  # never let logging break a connection
            for channel in self._channels:
                channel.dropped["internal_error"] += 1
            return True

    @property
    def over_capacity(self) -> bool:
        """``block`` mode: readers should stay paused."""
        return self._over

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once (soon) when the queues have room again."""
        if self._over:
            self._waiters.append(callback)
        else:
            asyncio.get_running_loop().call_soon(callback)

    async def wait_capacity(self) -> None:
        """Return once the queues have room again (at once when they have)."""
        if not self._over:
            return
        ready = asyncio.get_running_loop().create_future()
        self._waiters.append(lambda: None if ready.done() else ready.set_result(None))
        await ready

    def stats(self) -> dict[str, SinkStats]:
        return {
            ch.sink.name: SinkStats(ch.written, len(ch.queue), dict(ch.dropped))
            for ch in self._channels
        }

    @property
    def dropped_total(self) -> int:
        return sum(sum(ch.dropped.values()) for ch in self._channels)

    # -- the writer's side ----------------------------------------------------------

    async def run(self, stop_event: asyncio.Event | None = None) -> None:
        """Drain every sink until ``close`` (or ``stop_event``); report drops periodically."""
        try:
            async with asyncio.TaskGroup() as group:
                drains = [
                    group.create_task(self._drain(ch), name=f"accesslog-{ch.sink.name}")
                    for ch in self._channels
                ]
                helpers = [group.create_task(self._report_loop(), name="accesslog-report")]
                if stop_event is not None:
                    helpers.append(group.create_task(self._stop_on(stop_event)))
                if drains:
                    await asyncio.wait(drains)
                for helper in helpers:
                    helper.cancel()
        finally:
            self._report()
            for channel in self._channels:
                with contextlib.suppress(Exception):
                    await channel.sink.close()
            self._closed = True
            self._finished.set()

    async def _stop_on(self, stop_event: asyncio.Event) -> None:
        await stop_event.wait()
        self._begin_close()

    def _begin_close(self) -> None:
        self._closing = True
        for channel in self._channels:
            channel.wake.set()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout_s``), then stop; the rest is counted.

        ``run`` must have been started; it returns once this is done.
        """
        self._begin_close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished.wait(), timeout_s)
        for channel in self._channels:
            if channel.queue:
                channel.dropped["shutdown"] += len(channel.queue)
                channel.queue.clear()
            channel.wake.set()
        self._closed = True
        self._release()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished.wait(), 1.0)
        self._report()

    async def _drain(self, channel: _Channel) -> None:
        backoff = 0.1
        loop = asyncio.get_running_loop()
        taken_at = float("-inf")
        while True:
            if not channel.queue:
                if self._closing:
                    return
                channel.wake.clear()
                await channel.wake.wait()
                if self.batch_delay_s > 0 and not self._closing:
                    await self._gather(channel)
                continue
            if self.batch_delay_s > 0 and not self._closing:
                # records queued while the last batch was written: at most one batch
                # per batch_delay_s, so they wait no longer than a woken writer would
                await self._gather(channel, taken_at + self.batch_delay_s - loop.time())
            taken_at = loop.time()
            batch = [channel.queue[i] for i in range(min(len(channel.queue), BATCH_MAX))]
            try:
                drops = await channel.sink.write(batch)
            except SinkError as exc:
                channel.take(min(exc.written, len(channel.queue)))
                channel.written += exc.written
                self._sink_failed(channel, exc.reason)
                if self.block and not self._closed:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, RETRY_MAX_S)
                    continue
                failed = min(len(batch) - exc.written, len(channel.queue))
                channel.take(failed)
                channel.dropped["sink_error"] += failed
                self._check_capacity()
                continue
            backoff = 0.1
            channel.take(min(len(batch), len(channel.queue)))
            channel.written += len(batch) - sum(drops.values())
            channel.dropped.update(drops)
            if channel.failing is not None:
                channel.failing = None
                log.info(
                    "access log sink recovered",
                    extra={"event": "accesslog_sink_recovered", "path": channel.sink.name},
                )
            self._check_capacity()

    async def _gather(self, channel: _Channel, delay: float | None = None) -> None:
        """Let more records join the first one's batch for ``delay`` (``batch_delay_s``
        unless told). One timer per batch: ``wake`` stays set meanwhile, so recording
        costs nothing more."""
        delay = self.batch_delay_s if delay is None else delay
        if delay > 0 and len(channel.queue) < BATCH_MAX and not self._over:
            await asyncio.sleep(delay)

    def _sink_failed(self, channel: _Channel, reason: str) -> None:
        if channel.failing != reason:
            channel.failing = reason
            log.error(
                "access log sink failed: %s",
                reason,
                extra={"event": "accesslog_sink_failed", "path": channel.sink.name},
            )

    def _check_capacity(self) -> None:
        if self._over and all(len(ch.queue) <= ch.resume_at for ch in self._channels):
            self._release()

    def _release(self) -> None:
        self._over = False
        waiters, self._waiters = self._waiters, []
        for callback in waiters:
            try:
                callback()
            except Exception:
                log.exception("capacity callback failed", extra={"event": "accesslog_internal"})

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(self.report_interval_s)
            self._report()

    def _report(self) -> None:
        """One ``accesslog_dropped`` line for what was dropped since the last report."""
        fresh: Counter[tuple[str, str]] = Counter()
        for channel in self._channels:
            for reason, total in channel.dropped.items():
                key = (channel.sink.name, reason)
                if total > self._reported[key]:
                    fresh[key] = total - self._reported[key]
                    self._reported[key] = total
        if fresh:
            detail = ", ".join(
                f"{sink}/{reason}: {n}" for (sink, reason), n in sorted(fresh.items())
            )
            log.warning(
                "access log records dropped: %s (%d since start)",
                detail,
                self.dropped_total,
                extra={"event": "accesslog_dropped", "count": sum(fresh.values())},
            )
