"""Bulk simulation: millions of records as Parquet, fast, by replicating a scenario in Spark.

A base scenario is simulated in Python (tenants scaled so it holds about
``records / MAX_REPLICAS`` records), then Spark cross-joins it with replica
numbers and renames everything a replica owns: principals, tenants, topics,
connection ids, API key ids, and addresses (replica ``k`` maps ``10.b.c.d`` to
the IPv6 ULA ``fd00:k:b:c::d``, so each /24 stays one network). Every replica
keeps the base's labelled attacks, renamed the same way, so the labels hold at
any size.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .labels import Label, write_labels
from .load import read_logs, usable, write_parquet
from .simulate import SimulationOptions, scenario_json, write_simulation
from .spark import Progress

MAX_REPLICAS = 250
RECORDS_PER_PRINCIPAL = 1_750  # about what one principal writes in 72 hours


@dataclass(frozen=True, slots=True)
class BulkResult:
    records: int
    base_records: int
    replicas: int
    parquet_dir: Path
    labels_path: Path
    labels: list[Label]
    seconds: float


def rename_principal(name: str, k: int) -> str:
    return name if k == 0 else f"{name}-r{k}"


def rename_host(host: str, k: int) -> str:
    if k == 0 or ":" in host:
        return host
    _, b, c, d = host.split(".")
    return f"fd00:{k:x}:{b}:{c}::{d}"


def _rename_label(label: Label, k: int) -> Label:
    entity = (
        rename_host(label.entity, k)
        if label.entity[:1].isdigit()
        else rename_principal(label.entity, k)
    )
    detail = dict(label.detail)
    if "entities" in detail:
        detail["entities"] = [
            rename_host(e, k) if e[:1].isdigit() else rename_principal(e, k)
            for e in detail["entities"]
        ]
    return replace(label, id=f"{label.id}-r{k}", entity=entity, detail=detail)


def write_bulk(
    spark: Any, out: Path, options: SimulationOptions, records: int, progress: Progress
) -> BulkResult:
    from pyspark.sql import functions as F

    began = time.monotonic()
    per_tenant_records = RECORDS_PER_PRINCIPAL * options.principals * options.hours / 72
    tenants = max(options.tenants, math.ceil(records / MAX_REPLICAS / per_tenant_records))
    base_options = replace(options, tenants=min(tenants, 200))
    work = Path(tempfile.mkdtemp(prefix="kgw-bulk-"))
    try:
        progress.stage(f"simulating a base scenario of {base_options.tenants} tenants")
        base = write_simulation(work, base_options)
        replicas = max(1, math.ceil(records / base.records))
        progress.stage(f"replicating {base.records:,} records x {replicas} in Spark")
        frame = usable(read_logs(spark, [str(base.log_dir)], "json")).repartition(4).cache()
        frame.count()
        copies = spark.range(replicas).withColumnRenamed("id", "k")
        k = F.col("k")
        suffix = F.concat(F.lit("-r"), k.cast("string"))

        def renamed(column: str) -> Any:
            return F.when(k == 0, F.col(column)).otherwise(F.concat(F.col(column), suffix))

        octets = F.split(F.col("client_host"), r"\.")
        host = F.when(
            (k == 0) | F.col("client_host").contains(":"), F.col("client_host")
        ).otherwise(
            F.concat_ws(
                ":", F.lit("fd00"), F.lower(F.hex(k)), octets[1], octets[2], F.lit(""), octets[3]
            )
        )
        topics = F.when(k == 0, F.col("topics")).otherwise(
            F.transform("topics", lambda t: F.concat(t, suffix))
        )
        replicated = (
            frame.crossJoin(F.broadcast(copies))
            .withColumn("principal", renamed("principal"))
            .withColumn("tenant", renamed("tenant"))
            .withColumn("conn", renamed("conn"))
            .withColumn("api_key_id", renamed("api_key_id"))
            .withColumn("client_host", host)
            .withColumn("topics", topics)
            .withColumn("groups", F.transform("groups", lambda g: F.concat(g, suffix)))
            .drop("k")
        )
        progress.stage(f"writing Parquet to {out / 'parquet'}")
        parquet_dir = out / "parquet"
        write_parquet(replicated, str(parquet_dir))
        frame.unpersist()
        labels = [_rename_label(label, i) for i in range(replicas) for label in base.labels]
        labels_path = out / "labels.json"
        description = scenario_json(base.scenario, base_options)
        write_labels(
            labels_path,
            labels,
            {
                "options": description["options"],
                "start": description["start"],
                "end": description["end"],
                "replicas": replicas,
                "records": records,
            },
        )
        written = base.records * replicas
        return BulkResult(
            written,
            base.records,
            replicas,
            parquet_dir,
            labels_path,
            labels,
            time.monotonic() - began,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
