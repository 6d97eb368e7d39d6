"""``kgw status``: the service at a glance, from the gateways' own ``/metrics``. No I/O.

``summarize`` reads one Prometheus exposition per gateway instance (``None``: that
instance did not answer) and returns a JSON-able summary; ``render`` lays it out on
one terminal screen: brokers, partition health, the canary, the top lagging tenants
and the gateway instances. The first instance that exports cluster figures is used
for them (every instance sees the same cluster).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

TOP_TENANTS = 5
Samples = dict[str, list[tuple[dict[str, str], float]]]


def samples(text: str) -> Samples:
    """Sample name → (labels, value) pairs of one exposition."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def _one(found: Samples, name: str) -> float | None:
    values = found.get(name)
    return values[0][1] if values else None


def _by(found: Samples, name: str, label: str) -> dict[str, float]:
    return {labels.get(label, ""): value for labels, value in found.get(name, [])}


def _clean(value: float | None) -> float | int | None:
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return None
    return int(value) if value.is_integer() else round(value, 6)


def summarize(instances: Sequence[tuple[str, str | None]]) -> dict[str, Any]:
    """The summary of ``(url, exposition or None)`` per gateway instance."""
    parsed = [(url, samples(text) if text is not None else None) for url, text in instances]
    gateways = []
    cluster: Samples | None = None
    for url, found in parsed:
        if found is None:
            gateways.append({"url": url, "up": False})
            continue
        opened = sum(v for _, v in found.get("kgw_open_connections", []))
        gateways.append({"url": url, "up": True, "open_connections": int(opened)})
        if cluster is None and "kgw_cluster_partitions" in found:
            cluster = found
    summary: dict[str, Any] = {"gateways": gateways, "cluster": None, "canary": None, "lag": []}
    if cluster is None:
        cluster = next((f for _, f in parsed if f is not None), None)
        if cluster is None:
            return summary
    if "kgw_cluster_partitions" in cluster:
        summary["cluster"] = {
            key: _clean(_one(cluster, f"kgw_cluster_{key}"))
            for key in (
                "brokers_registered", "brokers_expected", "active_controller_id", "partitions",
                "offline_partitions", "under_replicated_partitions", "under_min_isr_partitions",
                "partition_imbalance_ratio", "leader_imbalance_ratio",
            )
        }  # fmt: skip
        partitions = _by(cluster, "kgw_cluster_broker_partitions", "broker")
        leaders = _by(cluster, "kgw_cluster_broker_leaders", "broker")
        sizes = _by(cluster, "kgw_cluster_broker_log_size_bytes", "broker")
        summary["cluster"]["brokers"] = {
            broker: {
                "partitions": _clean(count),
                "leaders": _clean(leaders.get(broker)),
                "log_bytes": _clean(sizes.get(broker)),
            }
            for broker, count in sorted(partitions.items(), key=lambda item: int(item[0]))
        }
    if "kgw_canary_produced_records_total" in cluster:
        latency = _by(cluster, "kgw_canary_latency_seconds", "quantile")
        summary["canary"] = {
            "availability": _clean(_one(cluster, "kgw_canary_availability_ratio")),
            "sla": _clean(_one(cluster, "kgw_canary_availability_sla_ratio")),
            "produced": _clean(_one(cluster, "kgw_canary_produced_records_total")),
            "lost": _clean(_one(cluster, "kgw_canary_lost_records_total")),
            "duplicated": _clean(_one(cluster, "kgw_canary_duplicated_records_total")),
            "latency_s": {q: _clean(v) for q, v in sorted(latency.items())},
        }
    lag = _by(cluster, "kgw_tenant_consumer_lag_records", "tenant")
    thresholds = _by(cluster, "kgw_tenant_lag_threshold_records", "tenant")
    top = sorted(lag.items(), key=lambda item: (-item[1], item[0]))[:TOP_TENANTS]
    summary["lag"] = [
        {"tenant": t, "lag": _clean(v), "threshold": _clean(thresholds.get(t))} for t, v in top
    ]
    return summary


def _fmt(value: Any, suffix: str = "") -> str:
    return "-" if value is None else f"{value}{suffix}"


def _bytes(value: Any) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def render(summary: dict[str, Any]) -> str:
    """One screen of text."""
    lines: list[str] = []
    cluster = summary.get("cluster")
    if cluster is None:
        lines.append("cluster     no figures (monitoring.health off, or no gateway answered)")
    else:
        bad = cluster["offline_partitions"] or cluster["under_replicated_partitions"]
        lines.append(
            f"cluster     {'DEGRADED' if bad else 'ok'}: brokers "
            f"{_fmt(cluster['brokers_registered'])}/{_fmt(cluster['brokers_expected'])}, "
            f"controller {_fmt(cluster['active_controller_id'])}"
        )
        lines.append(
            f"partitions  {_fmt(cluster['partitions'])} total, "
            f"{_fmt(cluster['offline_partitions'])} offline, "
            f"{_fmt(cluster['under_replicated_partitions'])} under-replicated, "
            f"{_fmt(cluster['under_min_isr_partitions'])} under min ISR; imbalance "
            f"replicas {_fmt(cluster['partition_imbalance_ratio'])}, "
            f"leaders {_fmt(cluster['leader_imbalance_ratio'])}"
        )
        lines.append("  broker  partitions  leaders  log size")
        for broker, figures in cluster["brokers"].items():
            lines.append(
                f"  {broker:>6}  {_fmt(figures['partitions']):>10}  {_fmt(figures['leaders']):>7}"
                f"  {_bytes(figures['log_bytes']):>9}"
            )
    canary = summary.get("canary")
    if canary is None:
        lines.append("canary      off")
    else:
        availability = canary["availability"]
        below = (
            availability is not None and canary["sla"] is not None and availability < canary["sla"]
        )
        latency = ", ".join(
            f"p{float(q) * 100:g} {v * 1000:.1f} ms"
            for q, v in canary["latency_s"].items()
            if v is not None
        )
        lines.append(
            f"canary      {'BELOW SLA' if below else 'ok'}: availability {_fmt(availability)} "
            f"(SLA {_fmt(canary['sla'])}), lost {_fmt(canary['lost'])}, "
            f"duplicated {_fmt(canary['duplicated'])}; {latency or 'no latency yet'}"
        )  # fmt: skip
    lines.append("lag         top tenants (records behind / threshold)")
    if not summary.get("lag"):
        lines.append("  none")
    for row in summary.get("lag", []):
        over = (
            row["threshold"] is not None
            and row["lag"] is not None
            and row["lag"] > row["threshold"]
        )
        mark = "  OVER" if over else ""
        lines.append(
            f"  {row['tenant']:<24} {_fmt(row['lag']):>12} / {_fmt(row['threshold'])}{mark}"
        )
    lines.append("gateways")
    for gateway in summary.get("gateways", []):
        state = f"up, {gateway['open_connections']} connections" if gateway["up"] else "DOWN"
        lines.append(f"  {gateway['url']:<40} {state}")
    return "\n".join(lines) + "\n"
