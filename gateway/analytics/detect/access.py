"""Where from and what: new or rare client networks, first access to a topic, throttle storms.

An address counts for a principal once it authenticated successfully or had a
request allowed; failed logins never make an address familiar. Addresses are
judged by their network (IPv4 /24, IPv6 first four groups) so pods that move
inside a known subnet are not news.
"""

from __future__ import annotations

from typing import Any

from .. import kinds
from ..findings import Finding
from .auth import episodes
from .context import Context

ALLOWED = ("allow", "none")


def network(column: str) -> Any:
    """The /24 (IPv4) or the first four groups (IPv6) of an address column."""
    from pyspark.sql import functions as F

    host = F.col(column)
    return F.when(host.contains(":"), F.substring_index(host, ":", 4)).otherwise(
        F.substring_index(host, ".", 3)
    )


def new_addresses(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    ev = ctx.events
    good = ev.where(
        F.col("principal").isNotNull()
        & F.col("client_host").isNotNull()
        & (
            (
                (F.col("type") == "connection")
                & (F.col("event") == "auth")
                & (F.col("outcome") == "success")
            )
            | ((F.col("type") == "request") & F.col("decision").isin(*ALLOWED))
        )
    )
    recent = F.col("ts_s") >= ctx.detect_from
    hosts = (
        good.groupBy("principal", "client_host")
        .agg(
            F.sum(F.when(recent, 0).otherwise(1)).alias("base"),
            F.sum(F.when(recent, 1).otherwise(0)).alias("seen"),
            F.min(F.when(recent, F.col("ts_s"))).alias("first"),
            F.max("ts_s").alias("last"),
            F.max("tenant").alias("tenant"),
        )
        .withColumn("net", network("client_host"))
    )
    nets = hosts.groupBy("principal", "net").agg(F.sum("base").alias("net_base"))
    totals = hosts.groupBy("principal").agg(
        F.sum("base").alias("total_base"),
        F.countDistinct(F.when(F.col("base") > 0, F.col("net"))).alias("nets"),
    )
    old_enough = ctx.first_seen.where(F.col("first_hour") <= ctx.detect_from - t.history_s)
    rows = (
        hosts.where(F.col("seen") > 0)
        .join(nets, ["principal", "net"])
        .join(totals.where(F.col("total_base") >= t.baseline_min_events), "principal")
        .join(old_enough.select("principal"), "principal")
        .where(
            (F.col("base") <= t.rare_address_max)
            & (F.col("net_base") < F.col("total_base") * t.rare_share)
        )
        .collect()
    )
    found = []
    for r in rows:
        new = r.net_base == 0
        what = "a network it never used before" if new else "a network it has rarely used"
        found.append(
            Finding(
                kinds.NEW_ADDRESS,
                "high" if new else "medium",
                1.0 + r.seen / 10 if new else 0.5 + r.seen / 20,
                r.principal,
                r.first,
                r.last,
                f"{r.principal} connected from {r.client_host}, {what} "
                f"({r.seen} successful logins and requests)",
                {
                    "address": r.client_host,
                    "network": r.net,
                    "events_from_address": r.seen,
                    "baseline_events_from_address": r.base,
                    "baseline_events_from_network": r.net_base,
                    "baseline_events": r.total_base,
                    "baseline_networks": r.nets,
                    "new": new,
                },
                principal=r.principal,
                client_host=r.client_host,
                tenant=r.tenant,
            )
        )
    return found


def first_topic_access(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    ev = ctx.events
    allowed = ev.where(
        (F.col("type") == "request") & F.col("decision").isin(*ALLOWED) & (F.size("topics") > 0)
    )
    recent = F.col("ts_s") >= ctx.detect_from

    def did(api: str | None) -> Any:
        kind = F.col("api") == api if api else ~F.col("api").isin("produce", "fetch")
        return F.max(F.when(recent & kind, 1).otherwise(0)).alias(api or "other")

    per_topic = (
        allowed.select("ts_s", "principal", "tenant", "api", F.explode("topics").alias("topic"))
        .groupBy("principal", "topic")
        .agg(
            F.min("ts_s").alias("first"),
            F.max("ts_s").alias("last"),
            F.sum(F.when(recent, 1).otherwise(0)).alias("recent"),
            did("produce"),
            did("fetch"),
            did(None),
            F.max("tenant").alias("tenant"),
        )
    )
    old_enough = ctx.first_seen.where(F.col("first_hour") <= ctx.detect_from - t.history_s)
    rows = (
        per_topic.where(F.col("first") >= ctx.detect_from)
        .join(old_enough.select("principal"), "principal")
        .collect()
    )
    found = []
    for r in rows:
        apis = [
            name
            for name, used in (("produce", r.produce), ("fetch", r.fetch), ("other", r.other))
            if used
        ]
        found.append(
            Finding(
                kinds.FIRST_TOPIC,
                "high" if r.produce else "medium" if r.fetch else "low",
                1.0 + r.recent / 100,
                r.principal,
                r.first,
                r.last,
                f"{r.principal} used topic {r.topic} for the first time "
                f"({r.recent} requests: {', '.join(apis)})",
                {"topic": r.topic, "requests": r.recent, "apis": apis},
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found


def throttle_storms(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    throttled = ctx.singles.where(
        (F.col("kind") == "throttled") & F.col("principal").isNotNull()
    ).select("ts_s", "principal", "tenant", "throttle_ms")
    rows = (
        episodes(throttled, "principal", t.throttle_gap_s)
        .groupBy("principal", "episode")
        .agg(
            F.count("*").alias("n"),
            F.sum("throttle_ms").alias("ms"),
            F.max("throttle_ms").alias("max_ms"),
            F.min("ts_s").alias("start"),
            F.max("ts_s").alias("end"),
            F.max("tenant").alias("tenant"),
        )
        .where((F.col("n") >= t.throttle_min) & (F.col("ms") >= t.throttle_ms_min))
        .collect()
    )
    found = []
    for r in rows:
        minutes = max(1.0, (r.end - r.start) / 60)
        found.append(
            Finding(
                kinds.THROTTLE_STORM,
                "medium" if r.ms >= 60_000 else "low",
                r.n / t.throttle_min,
                r.principal,
                r.start,
                r.end,
                f"{r.n} responses to {r.principal} throttled in {minutes:.0f} min "
                f"({r.ms / 1000:.0f} s of throttle time)",
                {
                    "throttled": r.n,
                    "throttle_ms_total": r.ms,
                    "throttle_ms_max": r.max_ms,
                    "minutes": round(minutes, 1),
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return found
