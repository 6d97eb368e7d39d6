"""``kgw analyze --follow``: the batch detectors, near real time, on the access-log topic.

Spark Structured Streaming reads the topic the gateway writes (``accesslog.topic``)
with Spark's Kafka source (:mod:`.kafka_source`), parsing only the fields the rollups
use, and, every ``trigger_s`` seconds, hands the new records to :func:`on_batch`
(``foreachBatch``), which works incrementally:

1. the batch job's three rollups (:mod:`.rollups`: per principal, tenant, hour and
   address; per principal, hour and topic; the failed logins, throttled and
   administrative requests) are made of the micro-batch alone, in Spark, once parsed
   and cached;
2. they are merged into the rollups of every earlier micro-batch (:mod:`.state`: sums,
   minimums, maximums, a bitwise or), and the hours older than ``retain_hours`` before
   the newest record are forgotten;
3. the batch job's detectors (:func:`.job.detect`) run on the merged rollups: the same
   rows the batch job would make from all the retained records, so the same findings
   with the same evidence;
4. findings whose id (:attr:`.findings.Finding.id`: detector, entity, start) was
   emitted before are dropped; the new ones are appended to ``<out>/findings.jsonl``,
   their ids to ``<checkpoint>/emitted.jsonl``, then sent to the alert receivers
   (:mod:`.alerts`) and, when configured, to the response policy (:mod:`.respond`);
5. the merged rollups are saved as ``<checkpoint>/state/batch=<id>/``.

Spark's own checkpoint (``<checkpoint>/spark``) holds the topic offsets, and commits a
micro-batch only once :func:`on_batch` has returned. A micro-batch replayed after a
crash is merged into the state saved before it (never twice into its own), and the
emitted ids drop what was already sent: a restart neither skips records nor repeats a
finding.
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

from . import alerts, microbatch, rollups, state
from .findings import Finding
from .job import AnalyzeOptions, detect
from .load import TYPES, LogInputError, read_logs
from .records import parse_rfc3339, rfc3339_ms
from .respond import Responder
from .settings import FollowConfig, load_policy
from .spark import Progress
from .state import Rollups

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
    schema = ", ".join(f"`{name}` {TYPES.get(name, 'string')}" for name in rollups.USED)
    parsed = reader.load().select(
        F.from_json(F.col("value").cast("string"), schema, {"mode": "PERMISSIVE"}).alias("r")
    )
    columns = [
        F.try_to_timestamp(F.col("r.ts")).alias("ts") if name == "ts" else F.col(f"r.{name}")
        for name in rollups.USED
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
        self.state_dir = config.checkpoint_dir / "state"
        self.state_dir.mkdir(parents=True, exist_ok=True)
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
        self.state: Rollups | None = None
        self.state_id = -1
        loaded = state.load(self.state_dir, before=1 << 62) or self._migrate()
        if loaded is not None:
            self.state_id, self.state = loaded
        self.findings: list[Finding] = []  # those of the last micro-batch, new or not
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
        # One Spark pass: the micro-batch read and parsed, collected as Arrow; its three
        # rollups grouped in Arrow (:mod:`.microbatch`).
        table = rollups.prepare(frame, False).toArrow()
        if table.num_rows == 0:
            self._say(f"batch {batch_id}: 0 records")
            return
        batch = microbatch.rollups_of(table)
        count = int(sum(batch.groups.column("records").to_pylist()))
        rolled = time.monotonic() - began
        if self.state_id < batch_id:
            base = self.state
        else:  # a micro-batch replayed in this process: merged into the state before it
            before = state.load(self.state_dir, before=batch_id)
            base = None if before is None else before[1]
        merged = state.merge(base, batch)
        end = state.data_end(merged)
        horizon = int(end - self.config.retain_hours * HOUR) if end is not None else None
        if horizon is not None:
            merged = state.prune(merged, horizon)
        self.findings = self._detect(merged)
        new = self.emitted.fresh(self.findings)
        now = time.time()
        if new:
            self._emit(new, batch_id, now)
        if self.responder is not None:
            for report in self.responder.respond(new, now):
                self._append(self.config.out / "response.jsonl", report)
        state.save(merged, self.state_dir, batch_id)
        self.state, self.state_id = merged, batch_id
        if horizon is not None:
            self.emitted.forget_before(horizon)
        self.batches += 1
        self._say(
            f"batch {batch_id}: {count} records, {len(self.findings)} findings, {len(new)} new, "
            f"{time.monotonic() - began:.1f}s (rollups {rolled:.1f}s, "
            f"state {sum(t.num_rows for t in merged.tables().values())} rows)"
        )

    def _detect(self, merged: Rollups) -> list[Finding]:
        options = AnalyzeOptions(
            logs=(f"{self.config.source.topic} (followed)",),
            out=self.config.out,
            detect_hours=self.config.detect_hours,
            report=False,
        )
        try:
            return detect(
                lambda: rollups.single_rows(merged.singles),
                lambda: merged.groups,
                lambda: merged.topics,
                options,
                Progress("follow", 4, quiet=True),
            ).findings
        except LogInputError:  # only unreadable lines so far
            return []

    def _migrate(self) -> tuple[int, Rollups] | None:
        """A checkpoint of the earlier layout (the retained records, ``records/batch=<id>/``):
        rolled up once into the state of its last micro-batch."""
        old = self.config.checkpoint_dir / "records"
        batches = [p for p in old.glob("batch=*") if any(p.glob("*.parquet"))]
        ids = [int(p.name.split("=", 1)[1]) for p in batches]
        if not ids:
            return None
        frame = read_logs(self.spark, [str(old)], "parquet")
        rolled = state.collect(self.spark, rollups.prepare(frame))
        state.save(rolled, self.state_dir, max(ids))
        shutil.rmtree(old, ignore_errors=True)
        log.info("analytics.follow_state_migrated", extra={"batches": len(ids)})
        return max(ids), rolled

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

    def _append(self, path: Path, item: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(item, default=str) + "\n")

    def _say(self, message: str) -> None:
        log.info("analytics.follow_batch", extra={"detail": message})
        if not self.quiet:
            print(f"[follow] {message}", flush=True)


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
