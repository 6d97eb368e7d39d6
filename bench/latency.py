"""Paired produce-latency probe: every target paced side by side in one window.

Why not Kafka's ``ProducerPerformance`` for the p99 target: it counts from the first
record, so its p99 holds the JVM's start (metadata, connections, JIT) — at a quarter
of the direct rate the direct brokers' own p99 came out at 0.2-0.7 s while their median
was 5-9 ms — and targets measured one after another see different broker hiccups (a
GC pause, a log roll), which on this 2-core machine move a p99 by hundreds of ms from
one run to the next. A difference of 5 ms cannot be read from that.

This probe produces to all targets at once from one process (librdkafka, one producer
per target, ``acks=all``, ``linger.ms=0``): every tick sends one record to each target, in
an order that rotates from tick to tick, so each target sees the same broker moments.
Latency is librdkafka's per-record figure, ``Message.latency()``: the time from
``produce()`` to the moment it is *called*, which is in the delivery callback, so it is
only as exact as the polling that runs callbacks. Each producer is therefore polled by a
thread of its own that blocks in ``poll()`` and runs the callback as soon as librdkafka
has the acknowledgement. (Polling once per tick, after each ``produce()``, read every
latency at the next tick: the median came out as exactly the tick interval, 10.0 ms at
100 records/s and 27 ms at 37, and every p99 as a whole number of ticks, so a difference
of 5 ms could not be seen.) Records sent during the warm-up are not counted. The
machine's CPU use over the window is reported with the figures, so a reader can see the
rate left it unsaturated.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.sysinfo import CpuWindow, busy_pct

# Records/s per target. Each record is a request of its own (linger.ms=0): at 500 per
# target to four targets (2,000 requests/s, acks=all) this 2-core machine was 99.7-100 %
# busy with the brokers' replication; at 100 per target it was 60-68 % busy.
RATE = 100.0
SETTLED_PCT = 50.0  # the machine's busy share a round waits for (what ran before it)
POLL_S = 0.1  # a poller's longest wait: how soon it sees the end of the window


@dataclass(frozen=True)
class ProbeTarget:
    """One target: its librdkafka settings (bootstrap and security) and its topic."""

    name: str
    config: Mapping[str, str]
    topic: str
    gateway_pid: int | None = None


@dataclass
class _Samples:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (``q`` in (0, 1])."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(math.ceil(q * len(sorted_values)), 1)
    return sorted_values[rank - 1]


def describe(latencies_ms: Sequence[float]) -> dict[str, float]:
    values = sorted(latencies_ms)
    return {
        "records": len(values),
        "avg_ms": round(sum(values) / len(values), 3),
        "p50_ms": round(percentile(values, 0.50), 3),
        "p99_ms": round(percentile(values, 0.99), 3),
        "p999_ms": round(percentile(values, 0.999), 3),
        "max_ms": round(values[-1], 3),
    }


def rotated(names: Sequence[str], tick: int) -> list[str]:
    """The targets in the order of ``tick``: each is first once every len(names) ticks."""
    shift = tick % len(names)
    return [*names[shift:], *names[:shift]]


def probe(
    targets: Sequence[ProbeTarget], rate_per_target: float, warmup_s: float,
    measure_s: float, record_size: int,
) -> dict[str, Any]:  # fmt: skip
    """Runs the paired probe; raises when any record fails or is left undelivered."""
    from confluent_kafka import KafkaError, Message, Producer

    if rate_per_target <= 0 or measure_s <= 0 or not targets:
        raise ValueError("the probe needs targets, a positive rate and a measuring window")
    names = [t.name for t in targets]
    samples = {name: _Samples() for name in names}
    common = {"acks": "all", "linger.ms": 0, "enable.idempotence": True,
              "compression.type": "none"}  # fmt: skip
    producers = {
        t.name: Producer({**t.config, **common, "client.id": f"latency-probe-{t.name}"})
        for t in targets
    }
    by_name = {t.name: t for t in targets}
    payload = os.urandom(record_size)

    def on_delivery(name: str, counted: bool) -> Any:  # two per target, made once
        def done(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                samples[name].errors.append(str(err))
            elif counted:
                latency = msg.latency()
                if latency is None:
                    samples[name].errors.append("delivered without a latency")
                else:
                    samples[name].latencies_ms.append(latency * 1000.0)

        return done

    callbacks = {(n, c): on_delivery(n, c) for n in names for c in (False, True)}
    stopping = threading.Event()
    pollers = [
        threading.Thread(target=_poll_until, args=(p, stopping), name=f"poll-{n}", daemon=True)
        for n, p in producers.items()
    ]
    for poller in pollers:
        poller.start()
    try:
        windows = _send_paced(producers, by_name, callbacks, rate_per_target, warmup_s,
                              measure_s, payload)  # fmt: skip
    finally:
        stopping.set()
        for poller in pollers:
            poller.join()
    usage = _usage(windows, targets)
    for name, producer in producers.items():
        left = producer.flush(60)
        if left:
            samples[name].errors.append(f"{left} records undelivered after 60 s")
    failed = {name: s.errors[:3] for name, s in samples.items() if s.errors}
    if failed:
        raise RuntimeError(f"latency probe: records failed: {failed}")
    return {
        "rate_per_target": rate_per_target,
        "warmup_s": warmup_s,
        "measure_s": measure_s,
        "targets": {name: describe(s.latencies_ms) for name, s in samples.items()},
        "usage": usage,
    }


def _send_paced(
    producers: Mapping[str, Any], by_name: Mapping[str, ProbeTarget],
    callbacks: Mapping[tuple[str, bool], Any], rate_per_target: float, warmup_s: float,
    measure_s: float, payload: bytes,
) -> dict[str, CpuWindow]:  # fmt: skip
    """One record to every target per tick, in rotating order; the CPU windows opened
    when counting starts."""
    names = list(producers)
    interval = 1.0 / rate_per_target
    start = time.perf_counter()
    counting_from, end = start + warmup_s, start + warmup_s + measure_s
    windows: dict[str, CpuWindow] = {}
    tick = 0
    while True:
        due = start + tick * interval
        now = time.perf_counter()
        if due >= end:
            return windows
        if due > now:
            time.sleep(due - now)
        counted = due >= counting_from
        if counted and not windows:  # the machine's and each gateway's CPU from here on
            windows = {t.name: CpuWindow(t.gateway_pid, []) for t in by_name.values()}
        for name in rotated(names, tick):
            producers[name].produce(
                by_name[name].topic, payload, on_delivery=callbacks[(name, counted)]
            )
        tick += 1


def _poll_until(producer: Any, stopping: threading.Event) -> None:
    """Run ``producer``'s delivery callbacks as their acknowledgements arrive (``poll``
    returns as soon as one is there; the GIL is released while it waits)."""
    while not stopping.is_set():
        producer.poll(POLL_S)


def settle(timeout_s: float = 90.0, sample_s: float = 3.0) -> float:
    """Waits until the machine is less than SETTLED_PCT busy over ``sample_s`` (the
    phases before a round leave the brokers replicating and collecting for a while), at
    most ``timeout_s``; returns the last busy share seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy = busy_pct(sample_s)
        if busy < SETTLED_PCT or time.monotonic() >= deadline:
            return busy


def _usage(windows: Mapping[str, CpuWindow], targets: Sequence[ProbeTarget]) -> dict[str, Any]:
    """The machine's busy share and load over the counted window, and each gateway's cores."""
    if not windows:
        return {}
    stopped = {name: window.stop() for name, window in windows.items()}
    machine = next(iter(stopped.values()))
    return {
        "machine_busy_pct": machine["machine_busy_pct"],
        "load1_before": machine["load1_before"],
        "load1_after": machine["load1_after"],
        "gateway_cores": {
            t.name: stopped[t.name]["gateway_cores"] for t in targets if t.gateway_pid
        },
    }


def added_p99(rounds: Sequence[Mapping[str, Any]], target: str, base: str) -> float | None:
    """Median over rounds of ``p99(target) - p99(base)``, each difference taken inside
    one round (the same window); None when a round lacks either."""
    diffs: list[float] = []
    for result in rounds:
        figures = result.get("targets", {})
        if target not in figures or base not in figures:
            return None
        diffs.append(float(figures[target]["p99_ms"]) - float(figures[base]["p99_ms"]))
    return statistics.median(diffs) if diffs else None
