"""``bench.fullstack``'s split of the gateway's time (user, system, reads, waits per
amount moved), summed over a phase's runs."""

from __future__ import annotations

from typing import Any

from bench.fullstack_report import summarize, table


def _run(phase: str, target: str, user: float, system: float, reads: int) -> dict[str, Any]:
    return {
        "phase": phase, "target": target, "round": 1,
        "result": {"records_per_s": 1000.0, "mb_per_s": 1.0, "fetch_mb_per_s": 1.0,
                   "p99_ms": 1.0, "avg_ms": 1.0},
        "cpu": {"bytes": 500_000_000, "gateway_cpu_s": user + system,
                "gateway_cpu_s_per_gb": 2 * (user + system),
                "gateway_user_s": user, "gateway_system_s": system,
                "gateway_read_calls": reads, "gateway_voluntary_switches": reads // 2},
    }  # fmt: skip


def test_the_split_is_per_gb_and_per_mb_over_all_runs_of_a_phase() -> None:
    runs = [
        _run("produce", "gateway", 1.0, 0.5, 10_000),
        _run("produce", "gateway", 2.0, 0.5, 30_000),
        _run("consume", "gateway", 0.25, 0.25, 1_000),
    ]
    row = summarize(runs)["gateway"]
    assert row["produce_user_s_per_gb"] == 3.0  # 3 s over 1 GB
    assert row["produce_system_s_per_gb"] == 1.0
    assert row["produce_read_calls_per_mb"] == 40.0  # 40,000 reads over 1,000 MB
    assert row["produce_voluntary_switches_per_mb"] == 20.0
    assert row["consume_user_s_per_gb"] == 0.5
    assert row["consume_read_calls_per_mb"] == 2.0


def test_results_from_before_the_split_print_without_its_rows() -> None:
    runs = [_run("produce", "gateway", 1.0, 0.5, 10), _run("consume", "gateway", 1.0, 0.5, 10)]
    for run in runs:
        for name in ("user_s", "system_s", "read_calls", "voluntary_switches"):
            del run["cpu"][f"gateway_{name}"]
    doc = {"summary": summarize(runs), "ratios": {}, "contention": None, "targets": []}
    assert "gateway CPU s/GB, both" in table(doc)
    assert "user s/GB" not in table(doc)
    runs = [_run("produce", "gateway", 1.0, 0.5, 10), _run("consume", "gateway", 1.0, 0.5, 10)]
    doc["summary"] = summarize(runs)
    assert "  produce: user s/GB" in table(doc)
