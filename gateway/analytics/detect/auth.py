"""Failed authentication: bursts per principal and per address, and password spraying.

Failures are cut into bursts: consecutive failures for the same key no further
apart than a gap belong to one burst. These detectors need no baseline and look
at the whole input.
"""

from __future__ import annotations

from typing import Any

from .. import kinds
from ..findings import Finding
from .context import Context


def episodes(frame: Any, key: str, gap_s: int) -> Any:
    """``frame`` with an ``episode`` number per ``key``: a new one after a gap over ``gap_s``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy(key).orderBy("ts_s")
    gap = F.col("ts_s") - F.lag("ts_s").over(ordered)
    starts = F.when(gap.isNull() | (gap > gap_s), 1).otherwise(0)
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return frame.withColumn("_start", starts).withColumn("episode", F.sum("_start").over(running))


def failures(ctx: Context) -> Any:
    from pyspark.sql import functions as F

    return ctx.singles.where(F.col("kind") == "auth_failure").select(
        "ts_s", "principal", "tenant", "client_host"
    )


def _severity(count: int) -> str:
    return "critical" if count >= 100 else "high" if count >= 30 else "medium"


def auth_bursts(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    failed = failures(ctx)
    found: list[Finding] = []
    by_principal = (
        episodes(failed.where(F.col("principal").isNotNull()), "principal", t.auth_gap_s)
        .groupBy("principal", "episode")
        .agg(
            F.count("*").alias("n"),
            F.min("ts_s").alias("start"),
            F.max("ts_s").alias("end"),
            F.countDistinct("client_host").alias("addresses"),
            F.max("tenant").alias("tenant"),
            F.slice(F.array_sort(F.collect_set("client_host")), 1, 5).alias("sample"),
        )
        .where(F.col("n") >= t.auth_principal_min)
    )
    for row in by_principal.collect():
        minutes = max(1.0, (row.end - row.start) / 60)
        found.append(
            Finding(
                kinds.AUTH_BURST_PRINCIPAL,
                _severity(row.n),
                row.n / t.auth_principal_min,
                row.principal,
                row.start,
                row.end,
                f"{row.n} failed logins as {row.principal} in {minutes:.0f} min "
                f"from {row.addresses} address(es)",
                {
                    "failures": row.n,
                    "minutes": round(minutes, 1),
                    "addresses": row.addresses,
                    "sample_addresses": list(row.sample),
                    "threshold": t.auth_principal_min,
                },
                principal=row.principal,
                tenant=row.tenant,
            )
        )
    found.extend(_by_address(ctx, failed))
    return found


def _by_address(ctx: Context, failed: Any) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    found: list[Finding] = []
    keyed = failed.where(F.col("client_host").isNotNull())
    for detector, gap in (
        (kinds.AUTH_BURST_ADDRESS, t.auth_gap_s),
        (kinds.SPRAYING, t.spray_gap_s),
    ):
        grouped = (
            episodes(keyed, "client_host", gap)
            .groupBy("client_host", "episode")
            .agg(
                F.count("*").alias("n"),
                F.min("ts_s").alias("start"),
                F.max("ts_s").alias("end"),
                F.countDistinct("principal").alias("principals"),
                F.slice(F.array_sort(F.collect_set("principal")), 1, 8).alias("sample"),
            )
        )
        if detector == kinds.AUTH_BURST_ADDRESS:
            grouped = grouped.where(F.col("n") >= t.auth_address_min)
        else:
            grouped = grouped.where(F.col("principals") >= t.spray_principals_min)
        for row in grouped.collect():
            minutes = max(1.0, (row.end - row.start) / 60)
            evidence = {
                "failures": row.n,
                "principals": row.principals,
                "minutes": round(minutes, 1),
                "sample_principals": list(row.sample),
            }
            if detector == kinds.SPRAYING:
                score = row.principals / t.spray_principals_min
                severity = "critical" if row.principals >= 20 else "high"
                summary = (
                    f"{row.client_host} failed to log in as {row.principals} different "
                    f"principals in {minutes:.0f} min"
                )
                evidence["threshold"] = t.spray_principals_min
            else:
                score = row.n / t.auth_address_min
                severity = _severity(row.n)
                summary = (
                    f"{row.n} failed logins from {row.client_host} in {minutes:.0f} min "
                    f"({row.principals} principal(s))"
                )
                evidence["threshold"] = t.auth_address_min
            found.append(
                Finding(
                    detector,
                    severity,
                    score,
                    row.client_host,
                    row.start,
                    row.end,
                    summary,
                    evidence,
                    client_host=row.client_host,
                )
            )
    return found
