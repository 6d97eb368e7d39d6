"""``kgw analyze --follow``: the batch detectors, near real time, on the access-log topic.

Spark Structured Streaming reads the topic the gateway writes (``accesslog.topic``)
with Spark's Kafka source (:mod:`.kafka_source`) and, every ``trigger_s`` seconds,
hands the new records to :func:`on_batch` (``foreachBatch``):

1. the micro-batch's records are written as Parquet, with their flags, to
   ``<checkpoint>/records/batch=<id>/`` (overwritten if Spark replays the batch after a
   crash, so a replay never doubles a record); batches older than ``retain_hours`` are
   dropped — they are the state the detectors need (the baselines' history, the
   bursts in progress);
2. the batch job's own entry point (:func:`.job.analyze`) runs on the retained records,
   so the findings and their evidence are exactly the batch job's;
3. findings whose id (:attr:`.findings.Finding.id`: detector, entity, start) was
   emitted before are dropped; the new ones are appended to ``<out>/findings.jsonl``,
   their ids to ``<checkpoint>/emitted.jsonl``, then sent to the alert receivers
   (:mod:`.alerts`) and, when configured, to the response policy (:mod:`.respond`).

Spark's own checkpoint (``<checkpoint>/spark``) holds the topic offsets; with the
emitted ids beside it, a restart neither skips records nor repeats a finding.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import alerts, flags
from .findings import Finding
from .job import AnalyzeOptions, analyze
from .load import LogInputError, ddl
from .records import FIELDS, parse_rfc3339, rfc3339_ms
from .respond import Responder
from .settings import FollowConfig, load_policy
from .spark import Progress

log = logging.getLogger(__name__)
HOUR = 3600


def kafka_frame(spark: Any, config: FollowConfig) -> Any:
    """The streaming frame of the topic's records, with the schema's columns."""
    from pyspark.sql import functions as F

    source = config.source
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", source.starting_offsets)
        .option("failOnDataLoss", "false")
    )
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    for key, value in source.kafka_options.items():
        reader = reader.option(f"kafka.{key}", value)
    parsed = reader.load().select(
        F.from_json(F.col("value").cast("string"), ddl(), {"mode": "PERMISSIVE"}).alias("r")
    )
    columns = [
        F.try_to_timestamp(F.col("r.ts")).alias("ts") if name == "ts" else F.col(f"r.{name}")
        for name in FIELDS
    ]
    return parsed.select(*columns)


@dataclass(slots=True)
class Emitted:
    """The ids of the findings emitted so far (``<checkpoint>/emitted.jsonl``), with the
    end of each, so that ids older than the retained records can be forgotten."""

    path: Path
    ids: dict[str, float] = field(default_factory=dict)

    def load(self, also: Path | None = None) -> None:
        for source in (self.path, also):
            if source is None or not source.exists():
                continue
            for line in source.read_text(encoding="utf-8").splitlines():
                try:
                    item = json.loads(line)
                    end = item["end_s"] if "end_s" in item else parse_rfc3339(item["end"])
                    key = str(item["id"])
                    self.ids[key] = max(float(end), self.ids.get(key, float(end)))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a crash

    def fresh(self, findings: list[Finding]) -> list[Finding]:
        return [f for f in findings if f.id not in self.ids]

    def add(self, findings: list[Finding]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            for f in findings:
                self.ids[f.id] = f.end
                fh.write(json.dumps({"id": f.id, "end_s": f.end}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def forget_before(self, moment: float) -> None:
        kept = {i: end for i, end in self.ids.items() if end >= moment}
        if len(kept) == len(self.ids):
            return
        self.ids = kept
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps({"id": i, "end_s": e}) + "\n" for i, e in kept.items()))
        os.replace(tmp, self.path)


class Follower:
    """The state and the work of one ``--follow`` run (see the module docstring)."""

    def __init__(self, spark: Any, config: FollowConfig, quiet: bool = False) -> None:
        self.spark = spark
        self.config = config
        self.quiet = quiet
        self.records = config.checkpoint_dir / "records"
        self.records.mkdir(parents=True, exist_ok=True)
        config.out.mkdir(parents=True, exist_ok=True)
        self.findings_path = config.out / "findings.jsonl"
        self.emitted = Emitted(config.checkpoint_dir / "emitted.jsonl")
        self.emitted.load(also=self.findings_path)
        self.responder: Responder | None = None
        if config.response is not None:
            self.responder = Responder(
                config.response,
                load_policy(config.response.policy_file),
                config.checkpoint_dir / "response-state.json",
            )
        self.batches = 0
        self.lock = threading.Lock()

    def on_batch(self, frame: Any, batch_id: int) -> None:
        with self.lock:
            self._batch(frame, batch_id)

    def tick(self) -> None:
        """Between micro-batches (Spark runs none while the topic is quiet): lift the
        temporary blocks that have expired."""
        if self.responder is None:
            return
        with self.lock:
            for report in self.responder.respond([], time.time()):
                self._append(self.config.out / "response.jsonl", report)

    def _batch(self, frame: Any, batch_id: int) -> None:
        began = time.monotonic()
        target = self.records / f"batch={batch_id}"
        # One pass over the batch: written as it is read from Kafka, counted from the
        # files' footers; a batch without records leaves no directory.
        frame.where(flags.is_record()).select(
            *FIELDS, flags.expression().alias(flags.COLUMN)
        ).write.mode("overwrite").parquet(str(target))
        count = _rows(target)
        if count == 0:
            shutil.rmtree(target, ignore_errors=True)
        self._prune(time.time())
        findings = self._detect() if any(self.records.glob("batch=*/*.parquet")) else []
        new = self.emitted.fresh(findings)
        now = time.time()
        if new:
            self._emit(new, batch_id, now)
        if self.responder is not None:
            for report in self.responder.respond(new, now):
                self._append(self.config.out / "response.jsonl", report)
        self.batches += 1
        self._say(
            f"batch {batch_id}: {count} records, {len(findings)} findings, {len(new)} new, "
            f"{time.monotonic() - began:.1f}s"
        )

    def _detect(self) -> list[Finding]:
        options = AnalyzeOptions(
            logs=(str(self.records),),
            out=self.config.out,
            fmt="parquet",
            detect_hours=self.config.detect_hours,
            report=False,
        )
        try:
            return analyze(self.spark, options, Progress("follow", 8, quiet=True)).findings
        except LogInputError:
            return []

    def _emit(self, new: list[Finding], batch_id: int, now: float) -> None:
        with self.findings_path.open("a", encoding="utf-8") as fh:
            for f in new:
                line = {
                    **f.to_json(),
                    "batch": batch_id,
                    "emitted": rfc3339_ms(int(now * 1000)),
                    "lag_s": round(now - f.end, 3),
                }
                fh.write(json.dumps(line, default=str) + "\n")
                if not self.quiet:
                    print(f"  [{f.severity:<8}] {f.detector:<28} {f.summary}", flush=True)
            fh.flush()
            os.fsync(fh.fileno())
        self.emitted.add(new)
        for delivery in alerts.send(new, self.config.alerts):
            self._append(
                self.config.out / "alerts.jsonl",
                {"receiver": delivery.receiver, "ok": delivery.ok, "status": delivery.status,
                 "attempts": delivery.attempts, "error": delivery.error,
                 "findings": [f.id for f in new]},
            )  # fmt: skip

    def _prune(self, now: float) -> None:
        horizon = now - self.config.retain_hours * HOUR
        for batch in self.records.glob("batch=*"):
            if batch.stat().st_mtime < horizon:
                shutil.rmtree(batch, ignore_errors=True)
        self.emitted.forget_before(horizon)

    def _append(self, path: Path, item: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(item, default=str) + "\n")

    def _say(self, message: str) -> None:
        log.info("analytics.follow_batch", extra={"detail": message})
        if not self.quiet:
            print(f"[follow] {message}", flush=True)


def _rows(directory: Path) -> int:
    """Records in a batch's Parquet files, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in directory.glob("*.parquet"))


def follow(
    spark: Any, config: FollowConfig, run_for_s: float | None = None, quiet: bool = False
) -> int:
    """Run until SIGTERM/SIGINT (or ``run_for_s``); the number of micro-batches handled."""
    follower = Follower(spark, config, quiet)
    query = (
        kafka_frame(spark, config)
        .writeStream.foreachBatch(follower.on_batch)
        .option("checkpointLocation", str(config.checkpoint_dir / "spark"))
        .trigger(processingTime=f"{config.trigger_s:g} seconds")
        .queryName("kgw-follow")
        .start()
    )
    stopping = threading.Event()

    def stop(signum: int, _frame: Any) -> None:
        stopping.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    deadline = None if run_for_s is None else time.monotonic() + run_for_s
    next_tick = time.monotonic() + config.trigger_s
    try:
        while not stopping.is_set() and query.isActive:
            if deadline is not None and time.monotonic() >= deadline:
                break
            query.awaitTermination(0.5)
            if time.monotonic() >= next_tick:
                follower.tick()
                next_tick = time.monotonic() + config.trigger_s
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
    finally:
        query.stop()  # waits for the batch in progress
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return follower.batches
