"""Detectors that compare an hour with the principal's own history.

The baseline is everything before ``detect_from``; findings come from the hours
after it. Spikes use the robust z-score ``(x - median) / (1.4826 * MAD)`` over
the principal's baseline hours, and must also clear a multiple of the median and
of the busiest baseline hour, so a nightly batch job that is busy every night is
not a spike.
"""

from __future__ import annotations

from typing import Any

from .. import kinds
from ..findings import Finding, merge_adjacent
from .context import Context

MAD_SCALE = 1.4826
HOUR = 3600


def robust_stats(frame: Any, key: str, *columns: str) -> Any:
    """Per ``key`` and for each column: ``<column>_med``, ``_mad``, ``_max`` and ``_n``."""
    from pyspark.sql import functions as F

    medians = frame.groupBy(key).agg(
        *[F.median(c).alias(f"{c}_med") for c in columns],
        *[F.max(c).alias(f"{c}_max") for c in columns],
        *[F.count("*").alias(f"{c}_n") for c in columns],
    )
    deviations = (
        frame.join(medians, key)
        .groupBy(key)
        .agg(*[F.median(F.abs(F.col(c) - F.col(f"{c}_med"))).alias(f"{c}_mad") for c in columns])
    )
    return medians.join(deviations, key)


def robust_z(column: str) -> Any:
    """The robust z-score of ``column`` against ``<column>_med`` and ``<column>_mad``."""
    from pyspark.sql import functions as F

    med, mad = F.col(f"{column}_med"), F.col(f"{column}_mad")
    scale = F.greatest(mad * MAD_SCALE, med * 0.1, F.lit(1.0))
    return (F.col(column) - med) / scale


def _with_history(ctx: Context, frame: Any) -> Any:
    from pyspark.sql import functions as F

    old_enough = ctx.first_seen.where(
        F.col("first_hour") <= ctx.detect_from - ctx.thresholds.history_s
    )
    return frame.join(old_enough.select("principal"), "principal")


def volume_spikes(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    active = ctx.hourly.where(F.col("allowed") > 0)
    base = active.where(F.col("hour") < ctx.detect_from)
    stats = robust_stats(base, "principal", "allowed", "bytes")
    recent = _with_history(ctx, active.where(F.col("hour") >= ctx.detect_from)).join(
        stats, "principal"
    )

    def spike(column: str) -> Any:
        return (
            (robust_z(column) >= t.volume_z)
            & (F.col(column) >= F.col(f"{column}_med") * t.volume_ratio)
            & (F.col(column) > F.col(f"{column}_max") * t.volume_over_max)
        )

    rows = (
        recent.withColumn("z_req", robust_z("allowed"))
        .withColumn("z_bytes", robust_z("bytes"))
        .where(spike("allowed") | spike("bytes"))
        .collect()
    )
    found = []
    for r in rows:
        ratio = r.allowed / max(r.allowed_med, 1.0)
        z = max(r.z_req, r.z_bytes)
        found.append(
            Finding(
                kinds.VOLUME_SPIKE,
                "high" if z >= 20 or ratio >= 10 else "medium",
                z / t.volume_z,
                r.principal,
                r.hour,
                r.hour + HOUR,
                f"{r.principal} made {r.allowed} requests ({_size(r.bytes)}) in an hour; "
                f"its usual hour is {r.allowed_med:.0f} requests",
                {
                    "requests": r.allowed,
                    "bytes": r.bytes,
                    "baseline_median_requests": r.allowed_med,
                    "baseline_mad_requests": r.allowed_mad,
                    "baseline_max_requests": r.allowed_max,
                    "baseline_median_bytes": r.bytes_med,
                    "robust_z_requests": round(r.z_req, 2),
                    "robust_z_bytes": round(r.z_bytes, 2),
                    "ratio_to_median": round(ratio, 2),
                    "baseline_hours": r.allowed_n,
                },
                principal=r.principal,
                tenant=r.tenant,
            )
        )
    return merge_adjacent(found)


def denied_spikes(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    hours = ctx.hourly.where(F.col("total") > 0)
    stats = robust_stats(hours.where(F.col("hour") < ctx.detect_from), "principal", "denied")
    rows = (
        _with_history(ctx, hours.where(F.col("hour") >= ctx.detect_from))
        .join(stats, "principal", "left")
        .fillna({"denied_med": 0.0, "denied_mad": 0.0, "denied_max": 0, "denied_n": 0})
        .withColumn("z", robust_z("denied"))
        .where(
            (F.col("denied") >= t.denied_min)
            & (F.col("z") >= t.denied_z)
            & (F.col("denied") > F.col("denied_max") * t.denied_over_max)
        )
        .collect()
    )
    found = [
        Finding(
            kinds.DENIED_SPIKE,
            "high" if r.denied >= 100 else "medium",
            r.z / t.denied_z,
            r.principal,
            r.hour,
            r.hour + HOUR,
            f"{r.denied} requests of {r.principal} denied in an hour "
            f"(usually {r.denied_med:.0f}, at most {r.denied_max})",
            {
                "denied": r.denied,
                "requests": r.total,
                "baseline_median": r.denied_med,
                "baseline_mad": r.denied_mad,
                "baseline_max": r.denied_max,
                "robust_z": round(r.z, 2),
            },
            principal=r.principal,
            tenant=r.tenant,
        )
        for r in rows
    ]
    return merge_adjacent(found)


def probing(ctx: Context, denied_topics: Any) -> list[Finding]:
    """``denied_topics``: per principal and hour, the distinct topics denied (``topics``)."""
    from pyspark.sql import functions as F

    t = ctx.thresholds
    counted = denied_topics.withColumn("distinct", F.size("topics"))
    base = (
        counted.where(F.col("hour") < ctx.detect_from)
        .groupBy("principal")
        .agg(F.max("distinct").alias("base_max"))
    )
    rows = (
        counted.where(F.col("hour") >= ctx.detect_from)
        .join(base, "principal", "left")
        .fillna({"base_max": 0})
        .where(
            (F.col("distinct") >= t.probing_topics_min)
            & (F.col("distinct") > F.col("base_max") * t.probing_over_max)
        )
        .collect()
    )
    found = [
        Finding(
            kinds.PROBING,
            "critical" if r.distinct >= 20 else "high",
            r.distinct / t.probing_topics_min,
            r.principal,
            r.hour,
            r.hour + HOUR,
            f"{r.principal} was denied {r.distinct} different topics in an hour",
            {
                "distinct_denied_topics": r.distinct,
                "denied": r.denied,
                "baseline_max_distinct": r.base_max,
                "sample_topics": sorted(r.topics)[:10],
            },
            principal=r.principal,
            tenant=r.tenant,
        )
        for r in rows
    ]
    return merge_adjacent(found)


def unusual_hours(ctx: Context) -> list[Finding]:
    from pyspark.sql import functions as F

    t = ctx.thresholds
    hod = ((F.col("hour") / HOUR).cast("long") % 24).alias("hod")
    active = ctx.hourly.where(F.col("allowed") > 0).select("*", hod)
    base = active.where(F.col("hour") < ctx.detect_from)
    totals = base.groupBy("principal").agg(F.sum("allowed").alias("base_total"))
    shares = (
        base.groupBy("principal", "hod")
        .agg(F.sum("allowed").alias("at_hod"))
        .join(totals, "principal")
        .withColumn("share", F.col("at_hod") / F.col("base_total"))
    )
    usual = (
        shares.where(F.col("share") >= t.unusual_share)
        .groupBy("principal")
        .agg(F.array_sort(F.collect_list("hod")).alias("usual"))
    )
    recent = _with_history(ctx, active.where(F.col("hour") >= ctx.detect_from))
    rows = (
        recent.join(totals.where(F.col("base_total") >= t.baseline_min_events), "principal")
        .join(shares.select("principal", "hod", "share"), ["principal", "hod"], "left")
        .fillna({"share": 0.0})
        .join(usual, "principal", "left")
        .where((F.col("allowed") >= t.unusual_min_requests) & (F.col("share") < t.unusual_share))
        .collect()
    )
    found = [
        Finding(
            kinds.UNUSUAL_HOUR,
            "medium",
            r.allowed / t.unusual_min_requests,
            r.principal,
            r.hour,
            r.hour + HOUR,
            f"{r.principal} made {r.allowed} requests at {r.hod:02d}:00 UTC, an hour that "
            f"held {r.share:.1%} of its baseline traffic",
            {
                "requests": r.allowed,
                "hour_of_day_utc": r.hod,
                "baseline_share": round(r.share, 5),
                "usual_hours_utc": list(r.usual or []),
                "baseline_requests": r.base_total,
            },
            principal=r.principal,
            tenant=r.tenant,
        )
        for r in rows
    ]
    return merge_adjacent(found)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
