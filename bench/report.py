"""Medians, gateway/direct ratios, the targets and the printed table (no I/O but ``print``)."""

from __future__ import annotations

from statistics import median
from typing import Any

PRODUCE_MIN_RATIO = 0.95
CONSUME_MIN_RATIO = 0.90
P99_MAX_ADDED_MS = 1.0

TARGETS = ("direct", "gateway")

# (phase, metric key, label, higher is better)
ROWS: tuple[tuple[str, str, str, bool], ...] = (
    ("produce", "records_per_s", "produce records/s (max rate)", True),
    ("produce", "mb_per_s", "produce MB/s (max rate)", True),
    ("produce", "avg_ms", "produce avg latency ms (max rate)", False),
    ("produce", "p99_ms", "produce p99 ms (max rate)", False),
    ("consume", "fetch_mb_per_s", "consume MB/s (fetch phase)", True),
    ("consume", "fetch_records_per_s", "consume records/s (fetch phase)", True),
    ("consume", "mb_per_s", "consume MB/s (incl. group join)", True),
    ("half", "records_per_s", "half-load records/s achieved", True),
    ("half", "avg_ms", "half-load avg latency ms", False),
    ("half", "p50_ms", "half-load p50 ms", False),
    ("half", "p95_ms", "half-load p95 ms", False),
    ("half", "p99_ms", "half-load p99 ms", False),
    ("half", "p999_ms", "half-load p99.9 ms", False),
)

CPU_ROWS: tuple[tuple[str, str], ...] = (
    ("produce", "produce"),
    ("consume", "consume"),
    ("half", "half-load produce"),
)


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """phase -> target -> metric -> median over the measured rounds (warm-up excluded)."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for run in runs:
        if run["phase"] in ("warmup", "profile"):
            continue
        grouped.setdefault(run["phase"], {}).setdefault(run["target"], []).append(run)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for phase, by_target in grouped.items():
        for target, items in by_target.items():
            keys = list(items[0]["result"]) + list(items[0]["cpu"])
            out.setdefault(phase, {})[target] = {
                key: round(median(_value(item, key) for item in items), 3) for key in keys
            }
    return out


def _value(run: dict[str, Any], key: str) -> float:
    source = run["result"] if key in run["result"] else run["cpu"]
    return float(source[key])


def ratios(meds: dict[str, dict[str, dict[str, float]]]) -> dict[str, float | None]:
    """``phase.metric`` -> gateway median / direct median."""
    out: dict[str, float | None] = {}
    for phase, key, _, _ in ROWS:
        direct = meds.get(phase, {}).get("direct", {}).get(key)
        gateway = meds.get(phase, {}).get("gateway", {}).get(key)
        ok = direct is not None and gateway is not None and direct != 0
        out[f"{phase}.{key}"] = round(gateway / direct, 4) if ok else None  # type: ignore[operator]
    return out


def targets(
    meds: dict[str, dict[str, dict[str, float]]], rat: dict[str, float | None]
) -> list[dict[str, Any]]:
    """The three targets, each with its measured value and PASS/MISS."""
    produce = rat.get("produce.records_per_s")
    consume = rat.get("consume.fetch_mb_per_s")
    half = meds.get("half", {})
    added: float | None = None
    if "direct" in half and "gateway" in half:
        added = round(half["gateway"]["p99_ms"] - half["direct"]["p99_ms"], 3)
    rows = [
        ("produce throughput, gateway/direct", produce, ">=", PRODUCE_MIN_RATIO),
        ("consume throughput, gateway/direct", consume, ">=", CONSUME_MIN_RATIO),
        ("p99 produce latency added at half load, ms", added, "<=", P99_MAX_ADDED_MS),
    ]
    out = []
    for name, value, op, threshold in rows:
        if value is None:
            verdict = "n/a"
        elif op == ">=":
            verdict = "PASS" if value >= threshold else "MISS"
        else:
            verdict = "PASS" if value <= threshold else "MISS"
        out.append({"target": name, "value": value, "op": op, "threshold": threshold,
                    "result": verdict})  # fmt: skip
    return out


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def contention(machine: dict[str, Any], runs: list[dict[str, Any]]) -> str | None:
    """Why the machine was too busy for trustworthy ratios, or None."""
    nproc = machine.get("nproc") or 1
    busy = machine.get("busy_pct_before_start", 0.0)
    load_start = machine.get("loadavg_start", [0.0])[0]
    peak = max([load_start, *(run["cpu"]["load1_before"] for run in runs)])
    reasons = []
    if busy > 25:
        reasons.append(f"{busy:.0f}% of the CPUs were busy before the cluster started")
    if peak > nproc:
        reasons.append(f"1-minute load average reached {peak:.1f} on {nproc} CPUs")
    return "; ".join(reasons) or None


def _row(label: str, a: str, b: str, c: str, width: int) -> str:
    return f"{label:<{width}} {a:>12} {b:>12} {c:>10}"


def table(summary: dict[str, Any]) -> str:
    """The printed report: per-metric medians and ratio, CPU use, targets."""
    meds = summary["medians"]
    rat = summary["ratios"]
    width = 38
    lines = [_row("metric (median of rounds)", "direct", "gateway", "gw/direct", width)]
    lines.append("-" * len(lines[0]))
    for phase, key, label, _ in ROWS:
        direct = meds.get(phase, {}).get("direct", {}).get(key)
        gateway = meds.get(phase, {}).get("gateway", {}).get(key)
        ratio = rat.get(f"{phase}.{key}")
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        lines.append(_row(label, _fmt(direct), _fmt(gateway), shown, width))
    lines.append("")
    lines.append(_row("CPU in cores, gateway runs", "gateway", "brokers", "machine %", width))
    for phase, label in CPU_ROWS:
        cpu = meds.get(phase, {}).get("gateway")
        if cpu is None:
            continue
        lines.append(
            f"{label:<{width}} {cpu['gateway_cores']:>12.2f} {cpu['brokers_cores']:>12.2f} "
            f"{cpu['machine_busy_pct']:>10.1f}"
        )
    lines.append("")
    contention = summary.get("contention")
    if contention:
        lines.append(f"WARNING: {contention}")
        lines.append("         the verdicts below are not conclusive; re-run on a quiet machine")
    lines.append("targets:")
    for t in summary["targets"]:
        value = t["value"]
        shown = "-" if value is None else f"{value:.3f}"
        lines.append(f"  [{t['result']:>4}] {t['target']}: {shown} ({t['op']} {t['threshold']})")
    return "\n".join(lines)
