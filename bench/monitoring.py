"""Monitoring benchmark: the gateway with service monitoring on against the same gateway
with it off, and direct, in one run (issue 20: no monitoring work on the data path).

``python -m bench.monitoring [--records N] [--rounds N]``

Targets, alternating within each round (``bench.variants``): ``direct``, ``gateway``
(metrics on, no monitoring) and ``gateway-monitoring`` (health and lag every 2 s and the
canary every 0.5 s: far more often than the defaults, to make any cost visible). Besides
the throughput and latency ratios it records each gateway's CPU seconds (user + system,
from ``/proc/<pid>/stat``) spent during its own runs and in total, because on a shared
machine wall-clock ratios are noisy. Results: ``bench/results/monitoring-latest.json``;
the ratio that answers the question is ``gateway-monitoring/gateway``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/monitoring.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.variants import Variant, VariantBench, add_common_args, run, say
from gateway.devstack.kafka_cluster import KafkaCluster

MONITORING = {
    "health": {"interval_s": 2, "expected_brokers": 3},
    "lag": {"interval_s": 2},
    "canary": {"enabled": True, "interval_s": 0.5},
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` so far (0 if it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


class PatientCluster(KafkaCluster):
    """A cluster that waits up to 10 minutes to start (a shared, busy machine)."""

    def start(self, timeout: float = 600) -> None:
        super().start(timeout)


class CpuBench(VariantBench):
    """``VariantBench`` that also charges each gateway's CPU seconds to the round it served."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.cpu: list[dict[str, object]] = []

    def one_round(self, target: str, rnd: int) -> None:
        pids = {name: gw.pid for name, gw in self.gateways.items()}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        super().one_round(target, rnd)
        after = {name: cpu_seconds(pid) for name, pid in pids.items()}
        used = {name: round(after[name] - before[name], 2) for name in pids}
        self.cpu.append({"round": rnd, "target": target, "gateway_cpu_s": used})
        say(f"  cpu-s during {target} r{rnd}: {used}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.monitoring", description=__doc__)
    add_common_args(parser)
    args = parser.parse_args(argv)
    variants = [
        Variant("gateway", {"metrics": {"port": 0}}),
        Variant("gateway-monitoring", {"metrics": {"port": 0}, "monitoring": MONITORING}),
    ]
    bench = CpuBench(args, variants, cluster_factory=lambda d, n: PatientCluster(d, nodes=n))
    pairs = [("gateway-monitoring", "gateway"), ("gateway", "direct")]
    totals: dict[str, float] = {}
    original_close = bench.close

    def close() -> None:
        for name, gw in bench.gateways.items():
            totals[name] = round(cpu_seconds(gw.pid), 2)
        original_close()

    bench.close = close  # type: ignore[method-assign]
    code, _doc = run("monitoring", bench, pairs, {"monitoring": MONITORING, "cpu": bench.cpu})
    say(f"gateway CPU seconds over the whole run (incl. idle time between rounds): {totals}")
    mine = {t: 0.0 for t in ("gateway", "gateway-monitoring")}
    for row in bench.cpu:
        target = str(row["target"])
        if target in mine:
            used = row["gateway_cpu_s"]
            assert isinstance(used, dict)
            mine[target] += float(used.get(target, 0.0))
    say(f"gateway CPU seconds during its own runs: {mine}")
    return code


if __name__ == "__main__":
    sys.exit(main())
