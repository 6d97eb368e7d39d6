"""The paired latency probe's pure parts (``bench.latency``) and how ``bench.fullstack``
reads issue 16's p99 target from it."""

from __future__ import annotations

from typing import Any

import pytest

from bench import latency
from bench.fullstack_report import P99_ADDED_MAX_MS, probe_lines, verdicts


def _round(p99: dict[str, float]) -> dict[str, Any]:
    figures = {
        name: {"records": 100, "avg_ms": 1.0, "p50_ms": 1.0, "p99_ms": value,
               "p999_ms": value, "max_ms": value}
        for name, value in p99.items()
    }  # fmt: skip
    return {"rate_per_target": 500.0, "warmup_s": 5.0, "measure_s": 60.0,
            "targets": figures, "usage": {"machine_busy_pct": 41.5}}  # fmt: skip


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert latency.percentile(values, 0.99) == 99.0
    assert latency.percentile(values, 0.50) == 50.0
    assert latency.percentile(values, 0.999) == 100.0
    assert latency.percentile([7.0], 0.99) == 7.0
    with pytest.raises(ValueError):
        latency.percentile([], 0.5)


def test_describe_sorts_before_it_reads() -> None:
    figures = latency.describe([5.0, 1.0, 3.0, 2.0, 4.0])
    assert figures == {"records": 5, "avg_ms": 3.0, "p50_ms": 3.0, "p99_ms": 5.0,
                       "p999_ms": 5.0, "max_ms": 5.0}  # fmt: skip


def test_each_target_goes_first_once_per_cycle() -> None:
    names = ["gateway", "full-scram", "full-mtls"]
    orders = [latency.rotated(names, tick) for tick in range(6)]
    assert [order[0] for order in orders] == names * 2
    for order in orders:
        assert sorted(order) == sorted(names)
        start = names.index(order[0])  # the cyclic order is kept
        assert order == names[start:] + names[:start]


def test_added_p99_is_the_median_of_differences_inside_each_round() -> None:
    rounds = [
        _round({"gateway": 100.0, "full-scram": 103.0}),  # a slow window for both: +3
        _round({"gateway": 10.0, "full-scram": 19.0}),  # +9
        _round({"gateway": 20.0, "full-scram": 21.0}),  # +1
    ]
    # differences of medians would be 21 - 20 = 1; the paired median is 3
    assert latency.added_p99(rounds, "full-scram", "gateway") == 3.0
    assert latency.added_p99(rounds[:2], "full-scram", "gateway") == 6.0
    assert latency.added_p99(rounds, "full-mtls", "gateway") is None
    assert latency.added_p99([], "full-scram", "gateway") is None


def test_the_p99_verdicts_come_from_the_probe() -> None:
    probes = [
        _round({"gateway": 10.0, "full-scram": 12.5, "full-mtls": 10.0 + 2 * P99_ADDED_MAX_MS})
    ]
    rows = {row["target"]: row for row in verdicts({}, {}, probes)}
    scram = rows["p99 ms added (paired probe), full-scram - gateway"]
    mtls = rows["p99 ms added (paired probe), full-mtls - gateway"]
    assert (scram["value"], scram["result"]) == (2.5, "met")
    assert (mtls["value"], mtls["result"]) == (2 * P99_ADDED_MAX_MS, "missed")
    without = {row["target"]: row for row in verdicts({}, {}, [])}
    assert without["p99 ms added (paired probe), full-scram - gateway"]["result"] == "n/a"


def test_the_table_states_the_rate_and_the_machine_load() -> None:
    lines = "\n".join(probe_lines([_round({"gateway": 10.0, "full-scram": 12.5})]))
    assert "500 records/s per target" in lines
    assert "41.5 % busy" in lines
    assert "full-scram 1.0/12.5/12.5" in lines
    assert probe_lines([]) == []


def test_the_probe_refuses_an_empty_window() -> None:
    target = latency.ProbeTarget("gateway", {"bootstrap.servers": "127.0.0.1:1"}, "t")
    with pytest.raises(ValueError):
        latency.probe([target], 0.0, 1.0, 1.0, 10)
    with pytest.raises(ValueError):
        latency.probe([], 10.0, 1.0, 1.0, 10)
