"""Arguments for, and parsers of, Kafka's ProducerPerformance and ConsumerPerformance.

Pure functions: nothing here runs a process. The formats are those of Kafka 4.1.
ProducerPerformance ends with one summary line::

    400000 records sent, 51234.5 records/sec (50.03 MB/sec), 310.12 ms avg latency,
    801.00 ms max latency, 290 ms 50th, 650 ms 95th, 760 ms 99th, 790 ms 99.9th.

(one line in the real output; percentiles are whole milliseconds). ConsumerPerformance
prints a header line and one line of comma-separated values::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_per_s>[\d.]+) records/sec "
    r"\((?P<mb_per_s>[\d.]+) MB/sec\), (?P<avg_ms>[\d.]+) ms avg latency, "
    r"(?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, (?P<p95_ms>\d+) ms 95th, "
    r"(?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99\.9th"
)


class PerfOutputError(Exception):
    """A perf tool's output did not contain the summary it should end with."""


@dataclass(frozen=True)
class ProduceResult:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_ms: float
    max_ms: float
    p50_ms: int
    p95_ms: int
    p99_ms: int
    p999_ms: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ConsumeResult:
    records: int
    mb: float
    mb_per_s: float
    records_per_s: float
    rebalance_ms: float
    fetch_ms: float
    fetch_mb_per_s: float
    fetch_records_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def producer_args(
    topic: str,
    bootstrap: str,
    records: int,
    record_size: int,
    batch_size: int,
    linger_ms: int,
    throughput: int = -1,
) -> list[str]:
    """ProducerPerformance arguments: acks=all, ``throughput`` records/s (-1: unthrottled)."""
    return [
        "--topic", topic,
        "--num-records", str(records),
        "--record-size", str(record_size),
        "--throughput", str(throughput),
        "--producer-props",
        "acks=all",
        f"bootstrap.servers={bootstrap}",
        f"linger.ms={linger_ms}",
        f"batch.size={batch_size}",
    ]  # fmt: skip


def consumer_args(topic: str, bootstrap: str, records: int, timeout_ms: int) -> list[str]:
    """ConsumerPerformance arguments: read ``records`` from the start of ``topic``."""
    return [
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--messages", str(records),
        "--timeout", str(timeout_ms),
    ]  # fmt: skip


def parse_producer(output: str) -> ProduceResult:
    """The final summary line of ProducerPerformance (the one with percentiles)."""
    found = list(_PRODUCER_SUMMARY.finditer(output))
    if not found:
        raise PerfOutputError("no ProducerPerformance summary line (with percentiles)")
    g = found[-1].groupdict()
    return ProduceResult(
        records=int(g["records"]),
        records_per_s=float(g["records_per_s"]),
        mb_per_s=float(g["mb_per_s"]),
        avg_ms=float(g["avg_ms"]),
        max_ms=float(g["max_ms"]),
        p50_ms=int(g["p50_ms"]),
        p95_ms=int(g["p95_ms"]),
        p99_ms=int(g["p99_ms"]),
        p999_ms=int(g["p999_ms"]),
    )


def parse_consumer(output: str) -> ConsumeResult:
    """The header line and the values line that follows it."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if not line.startswith("start.time"):
            continue
        names = [name.strip() for name in line.split(",")]
        values = [value.strip() for value in lines[index + 1].split(",")]
        if len(values) != len(names):
            break
        row = dict(zip(names, values, strict=True))
        try:
            return ConsumeResult(
                records=int(float(row["data.consumed.in.nMsg"])),
                mb=float(row["data.consumed.in.MB"]),
                mb_per_s=float(row["MB.sec"]),
                records_per_s=float(row["nMsg.sec"]),
                rebalance_ms=float(row["rebalance.time.ms"]),
                fetch_ms=float(row["fetch.time.ms"]),
                fetch_mb_per_s=float(row["fetch.MB.sec"]),
                fetch_records_per_s=float(row["fetch.nMsg.sec"]),
            )
        except (KeyError, ValueError) as exc:
            raise PerfOutputError(f"unexpected ConsumerPerformance columns: {exc}") from None
    raise PerfOutputError("no ConsumerPerformance header and values line")
