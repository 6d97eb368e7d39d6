"""``bench.fullstack``'s results: medians per target, the ratios of one run, issue 16's
verdicts and the printed table. Pure functions over the recorded runs."""

from __future__ import annotations

from typing import Any

from bench import latency, report

TARGETS = ("direct", "direct-tls", "gateway", "gateway-tls", "full-scram", "full-mtls")
FULL = ("full-scram", "full-mtls")
GB = 1e9
PAIRS = [
    ("full-scram", "direct-tls"),
    ("full-mtls", "direct-tls"),
    ("full-scram", "direct"),
    ("full-mtls", "direct"),
    ("full-scram", "gateway-tls"),
    ("full-mtls", "gateway-tls"),
    ("full-scram", "gateway"),
    ("gateway-tls", "gateway"),
    ("gateway", "direct"),
    ("direct-tls", "direct"),
]
PRODUCE_MIN, CONSUME_MIN = 0.95, 0.90  # full stack / direct TLS
FULL_CPU_MAX, TLS_CPU_MAX = 1.5, 1.3  # CPU/GB: full / TLS-only, TLS-only / plain gateway
P99_ADDED_MAX_MS = 5.0  # full stack over the plain gateway (paired probe, machine not saturated)
EQUAL_RATE_HELD = 0.95  # share of --equal-rate a target must reach for its CPU/GB to compare


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per target: medians of the figures the targets use, and CPU seconds per GB over all
    full-rate produce and consume runs (total gateway CPU / total bytes)."""
    meds = report.medians(runs)
    out: dict[str, dict[str, float]] = {}
    for target in TARGETS:
        try:
            row = {
                "produce_records_per_s": meds["produce"][target]["records_per_s"],
                "produce_mb_per_s": meds["produce"][target]["mb_per_s"],
                "consume_fetch_mb_per_s": meds["consume"][target]["fetch_mb_per_s"],
            }
        except KeyError:  # an incomplete run (or a target not chosen): this target lacks a phase
            continue
        if target in meds.get("half", {}) and target in meds.get("quarter", {}):
            row["half_p99_ms"] = meds["half"][target]["p99_ms"]
            row["quarter_p99_ms"] = meds["quarter"][target]["p99_ms"]
            row["quarter_avg_ms"] = meds["quarter"][target]["avg_ms"]
        mine = [r for r in runs if r["target"] == target and r["phase"] in ("produce", "consume")]
        if all("gateway_cpu_s_per_gb" in r["cpu"] for r in mine):
            for phase in ("produce", "consume"):
                row[f"{phase}_cpu_s_per_gb"] = meds[phase][target]["gateway_cpu_s_per_gb"]
            row["cpu_s_per_gb"] = _cpu_per_gb(mine)
        equal = [r for r in runs if r["target"] == target and r["phase"] == "equal"]
        if equal and all("gateway_cpu_s_per_gb" in r["cpu"] for r in equal):
            # --equal-rate: every target at one paced rate, so each sends requests of the
            # same size at the same pace and CPU per GB compares the gateways' work
            row["equal_rate"] = float(equal[0]["throughput_limit"])
            row["equal_records_per_s"] = meds["equal"][target]["records_per_s"]
            row["equal_cpu_s_per_gb"] = _cpu_per_gb(equal)
        row.update(_split([r for r in runs if r["target"] == target]))
        out[target] = row
    return out


def _cpu_per_gb(runs: list[dict[str, Any]]) -> float:
    """The gateway's CPU seconds over ``runs`` per GB they moved (not a median of runs)."""
    moved = float(sum(r["cpu"]["bytes"] for r in runs))
    return round(float(sum(r["cpu"]["gateway_cpu_s"] for r in runs)) / (moved / GB), 3)


SPLIT = ("user_s", "system_s", "read_calls", "voluntary_switches")


def _split(mine: list[dict[str, Any]]) -> dict[str, float]:
    """Where the gateway's time went per phase, over all its runs: user and system
    seconds per GB, read system calls and voluntary context switches (waits) per MB."""
    row: dict[str, float] = {}
    for phase in ("produce", "consume", "equal"):
        runs = [r for r in mine if r["phase"] == phase]
        if not runs or not all(f"gateway_{name}" in r["cpu"] for r in runs for name in SPLIT):
            continue
        moved = sum(r["cpu"]["bytes"] for r in runs)
        for name in SPLIT:
            spent = sum(r["cpu"][f"gateway_{name}"] for r in runs)
            if name.endswith("_s"):
                row[f"{phase}_{name}_per_gb"] = round(spent / (moved / GB), 3)
            else:
                row[f"{phase}_{name}_per_mb"] = round(spent / (moved / 1e6), 2)
    return row


def verdicts(
    summary: dict[str, dict[str, float]], rat: dict[str, dict[str, float]],
    probes: list[dict[str, Any]],
) -> list[dict[str, Any]]:  # fmt: skip
    """Issue 16's targets, each with the figure measured and met/missed. The p99 added
    is the paired probe's (``bench.latency``): each round's difference inside one
    window, the median over rounds."""
    rows: list[tuple[str, float | None, str, float]] = []
    for full in FULL:
        vs_tls = rat.get(f"{full}/direct-tls", {})
        rows += [
            (f"produce records/s, {full}/direct-tls", vs_tls.get("produce_records_per_s"),
             ">=", PRODUCE_MIN),
            (f"consume fetch MB/s, {full}/direct-tls", vs_tls.get("consume_fetch_mb_per_s"),
             ">=", CONSUME_MIN),
            (f"gateway CPU s/GB, {full}/gateway-tls",
             rat.get(f"{full}/gateway-tls", {}).get("cpu_s_per_gb"), "<=", FULL_CPU_MAX),
        ]  # fmt: skip
    tls_cpu = rat.get("gateway-tls/gateway", {}).get("cpu_s_per_gb")
    rows.append(("gateway CPU s/GB, gateway-tls/gateway", tls_cpu, "<=", TLS_CPU_MAX))
    for pair, threshold in (*((f"{full}/gateway-tls", FULL_CPU_MAX) for full in FULL),
                            ("gateway-tls/gateway", TLS_CPU_MAX)):  # fmt: skip
        held = all(_rate_held(summary.get(t, {})) for t in pair.split("/"))
        value = rat.get(pair, {}).get("equal_cpu_s_per_gb") if held else None
        rows.append((f"gateway CPU s/GB at an equal rate, {pair}", value, "<=", threshold))
    for full in FULL:
        added = latency.added_p99(probes, full, "gateway") if probes else None
        rows.append((f"p99 ms added (paired probe), {full} - gateway", added,
                     "<=", P99_ADDED_MAX_MS))  # fmt: skip
    out = []
    for name, value, op, threshold in rows:
        met = None if value is None else (value >= threshold if op == ">=" else value <= threshold)
        out.append({"target": name, "value": value, "op": op, "threshold": threshold,
                    "result": "n/a" if met is None else ("met" if met else "missed")})  # fmt: skip
    return out


def _rate_held(row: dict[str, float]) -> bool:
    """The target produced at (nearly) the equal rate asked for: else its CPU per GB
    at that rate is not comparable, and the verdicts on it are n/a."""
    if "equal_rate" not in row:
        return False
    return row["equal_records_per_s"] >= EQUAL_RATE_HELD * row["equal_rate"]


ROWS = (
    ("produce records/s (full rate)", "produce_records_per_s"),
    ("produce MB/s (full rate)", "produce_mb_per_s"),
    ("consume MB/s (fetch phase)", "consume_fetch_mb_per_s"),
    ("p99 ms, 1/2 direct rate (Java)", "half_p99_ms"),
    ("p99 ms, 1/4 direct rate (Java)", "quarter_p99_ms"),
    ("avg ms, 1/4 direct rate (Java)", "quarter_avg_ms"),
    ("gateway CPU s/GB, produce", "produce_cpu_s_per_gb"),
    ("gateway CPU s/GB, consume", "consume_cpu_s_per_gb"),
    ("gateway CPU s/GB, both", "cpu_s_per_gb"),
    ("produce records/s, equal rate", "equal_records_per_s"),
    ("gateway CPU s/GB, equal rate", "equal_cpu_s_per_gb"),
    ("  produce: user s/GB", "produce_user_s_per_gb"),
    ("  produce: system s/GB", "produce_system_s_per_gb"),
    ("  produce: reads/MB", "produce_read_calls_per_mb"),
    ("  produce: waits/MB", "produce_voluntary_switches_per_mb"),
    ("  consume: user s/GB", "consume_user_s_per_gb"),
    ("  consume: system s/GB", "consume_system_s_per_gb"),
    ("  consume: reads/MB", "consume_read_calls_per_mb"),
    ("  consume: waits/MB", "consume_voluntary_switches_per_mb"),
    ("  equal rate: user s/GB", "equal_user_s_per_gb"),
    ("  equal rate: system s/GB", "equal_system_s_per_gb"),
)


def table(doc: dict[str, Any]) -> str:
    summary, rat = doc["summary"], doc["ratios"]
    targets = [t for t in TARGETS if t in summary]
    lines = [f"{'metric (median of rounds)':<30}" + "".join(f"{t:>12}" for t in targets)]
    lines.append("-" * len(lines[0]))
    for label, key in ROWS:
        cells = [summary[t].get(key) for t in targets]
        if all(c is None for c in cells):
            continue  # a phase this run did not have (paced, equal rate, the time split)
        lines.append(f"{label:<30}" + "".join(f"{report._fmt(c):>12}" for c in cells))
    lines.append("\nratios (same run)")
    columns = [
        ("produce rec/s", "produce_records_per_s"),
        ("consume MB/s", "consume_fetch_mb_per_s"),
        ("1/4-rate p99", "quarter_p99_ms"),
        ("CPU s/GB", "cpu_s_per_gb"),
    ]
    if any("equal_cpu_s_per_gb" in row for row in rat.values()):  # with --equal-rate
        columns.append(("CPU equal rate", "equal_cpu_s_per_gb"))
    lines.append(f"{'':<26}" + "".join(f"{label:>15}" for label, _ in columns))
    for pair, row in rat.items():
        lines.append(f"{pair:<26}" + "".join(f"{report._fmt(row.get(k)):>15}" for _, k in columns))
    lines += probe_lines(doc.get("latency_probe", []))
    if doc["contention"]:
        lines.append(f"\nWARNING: {doc['contention']}")
        lines.append("         the verdicts below are not conclusive; re-run on a quiet machine")
    lines.append("\nissue 16 targets:")
    for t in doc["targets"]:
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        lines.append(f"  [{t['result']:>6}] {t['target']}: {value} ({t['op']} {t['threshold']})")
    return "\n".join(lines)


def probe_lines(probes: list[dict[str, Any]]) -> list[str]:
    """The paired probe's rounds: per target p50/p99/p99.9, and the machine's CPU use."""
    if not probes:
        return []
    first = probes[0]
    lines = [
        f"\npaired latency probe: {first['rate_per_target']:.0f} records/s per target, all "
        f"targets at once, {first['measure_s']:.0f} s counted after {first['warmup_s']:.0f} s "
        "(ms, librdkafka acks=all linger.ms=0)"
    ]
    for index, result in enumerate(probes, start=1):
        usage = result.get("usage", {})
        cells = "  ".join(
            f"{name} {fig['p50_ms']:.1f}/{fig['p99_ms']:.1f}/{fig['p999_ms']:.1f}"
            for name, fig in result["targets"].items()
        )
        lines.append(f"  round {index} (p50/p99/p99.9): {cells}")
        before, after = usage.get("load1_before", "-"), usage.get("load1_after", "-")
        busy = usage.get("machine_busy_pct", "-")
        lines.append(f"    machine {busy} % busy, load {before} -> {after}")
    return lines
