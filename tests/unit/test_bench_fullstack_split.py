"""``bench.fullstack``'s split of the gateway's time (user, system, reads, waits per
amount moved), summed over a phase's runs."""

from __future__ import annotations

from typing import Any

from bench.fullstack_report import PAIRS, summarize, table, verdicts
from bench.variants import ratios


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


def _equal(target: str, cpu_s: float, rate: float, asked: int = 1000) -> dict[str, Any]:
    run = _run("equal", target, cpu_s, 0.0, 100)
    run["throughput_limit"] = asked
    run["result"]["records_per_s"] = rate
    return run


def _gateways(equal: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    runs = [
        _run(p, t, 1.0, 0.0, 10) for p in ("produce", "consume") for t in ("gateway", "gateway-tls")
    ]
    return summarize([*runs, *equal])


def test_cpu_per_gb_at_an_equal_rate_is_judged_when_every_target_held_the_rate() -> None:
    plain = [_equal("gateway", 1.0, 999.0), _equal("gateway", 1.0, 1000.0)]
    tls = [_equal("gateway-tls", 1.5, 998.0), _equal("gateway-tls", 1.1, 1000.0)]
    summary = _gateways([*plain, *tls])
    assert summary["gateway"]["equal_cpu_s_per_gb"] == 2.0  # 2 s over 1 GB
    assert summary["gateway-tls"]["equal_cpu_s_per_gb"] == 2.6
    rows = {row["target"]: row for row in verdicts(summary, ratios(summary, PAIRS), [])}
    verdict = rows["gateway CPU s/GB at an equal rate, gateway-tls/gateway"]
    assert (verdict["value"], verdict["result"]) == (1.3, "met")
    assert "CPU equal rate" in table(
        {"summary": summary, "ratios": ratios(summary, PAIRS), "contention": None, "targets": []}
    )


def test_a_target_that_fell_short_of_the_equal_rate_is_not_compared() -> None:
    summary = _gateways([_equal("gateway", 1.0, 1000.0), _equal("gateway-tls", 0.5, 900.0)])
    rows = {row["target"]: row for row in verdicts(summary, ratios(summary, PAIRS), [])}
    assert rows["gateway CPU s/GB at an equal rate, gateway-tls/gateway"]["result"] == "n/a"
    assert rows["gateway CPU s/GB, gateway-tls/gateway"]["result"] == "met"  # full rate: 1.0


def test_without_an_equal_rate_phase_its_rows_and_verdicts_are_absent() -> None:
    summary = _gateways([])
    rows = {row["target"]: row for row in verdicts(summary, ratios(summary, PAIRS), [])}
    assert rows["gateway CPU s/GB at an equal rate, gateway-tls/gateway"]["result"] == "n/a"
    doc = {"summary": summary, "ratios": {}, "contention": None, "targets": []}
    assert "equal rate" not in table(doc)
