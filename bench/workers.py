"""Worker scaling: the same gateway with ``server.workers`` 1 and 2, when the gateway is
the bottleneck, in one run on one cluster (decisions 0030, 0038).

``python -m bench.workers [--quick] [--records N] [--rounds N] [--core-share F]
[--consume-passes K]``

A 2-core machine cannot give two workers two cores of their own while the brokers
and the load tools run elsewhere, so the run makes "a core" smaller instead:

- **pinning** (``taskset``): the bench process, hence the brokers and Kafka's load
  tools it starts, runs on every CPU but the first; every gateway process (the
  supervisor and each worker) on CPU 0, so the workers never share a CPU with the
  brokers or the tools;
- **an emulated core per worker** (``--core-share``, default 0.4): each worker process
  gets its own CFS quota (cgroup ``cpu.cfs_quota_us``) of that fraction of a CPU, two
  workers together 0.8 of CPU 0, so they do not compete with each other either; one
  worker saturates well below what the brokers can take and the gateway is the
  bottleneck for both targets; ``cpu.stat`` shows each worker hit its quota
  (``throttled_pct``: the share of scheduler periods it was throttled in; a low figure
  means something else bounded the run, and the report says so);
- **consume-heavy** (``--consume-passes``, default 3): what was produced is read that
  many times; the brokers serve it from the page cache (cheap for them), the gateway
  copies every byte (its costliest direction), so consume is where the gateway is the
  bottleneck first.

Rounds alternate direct, ``workers-1`` and ``workers-2`` (produce at full rate,
acks=all, the paced run of the shared harness, then the consume passes). The figures
are the ratio ``workers-2 / workers-1`` of MB/s measured in the same run (the issue's
target is >= 0.8 x N = 1.6) and, robust on a busy host, the gateway's **CPU seconds
per GB per direction** from ``/proc`` (supervisor and every worker), **net of its idle
CPU** (measured for ``--idle-s`` before the rounds: per-worker background work such
as metadata refreshes and quota syncs). Equal net CPU per GB with one and two workers
means a worker adds no per-byte cost: throughput then grows with the cores given to
workers until something else (brokers, NIC, clients) limits. Results:
``bench/results/workers-*.json``. Needs root for the cgroup; without it the quota is
skipped and the report says so. ``--quick``: 20 000 records, one round, 2 passes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/workers.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import perf, sysinfo
from bench.variants import Variant, VariantBench, add_common_args, run, say, start_variant
from gateway.devstack.gateway_proc import GatewayProcess

CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
TARGET_RATIO = 1.6  # >= 0.8 x N with N = 2
START_TIMEOUT_S = 300


def workers_of(pid: int) -> list[int]:
    """A supervisor's worker processes (children started with ``--worker-slot``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if int(fields[1]) == pid and b"--worker-slot" in argv:
                    found.append(int(entry.name))
    return sorted(found)


class SlowHostGateway(GatewayProcess):
    """Waits longer for readiness: fresh interpreters start slowly on a shared host."""

    def start(
        self, expected_brokers: int | None, timeout: float = START_TIMEOUT_S, detach: bool = False
    ) -> None:
        super().start(expected_brokers, max(timeout, START_TIMEOUT_S), detach)


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (0 when it is gone)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def pin(pid: int, cpus: str) -> None:
    subprocess.run(["taskset", "-a", "-cp", cpus, str(pid)], check=True, capture_output=True)


class WorkerQuota:
    """One cgroup (v1 ``cpu`` controller) per worker with a CFS quota of ``share`` CPU."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.groups: list[Path] = []
        self.available = os.geteuid() == 0 and (CGROUP_ROOT / "cpu.cfs_quota_us").exists()

    def limit(self, name: str, pid: int) -> Path | None:
        if not self.available:
            return None
        group = CGROUP_ROOT / f"kgw-bench-{os.getpid()}-{name}"
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(int(self.share * PERIOD_US)))
        (group / "cgroup.procs").write_text(str(pid))
        self.groups.append(group)
        return group

    def remove(self) -> None:
        for group in self.groups:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    (CGROUP_ROOT / "cgroup.procs").write_text(pid)
                group.rmdir()


def throttled(group: Path) -> tuple[int, int]:
    """``(nr_periods, nr_throttled)`` of a cgroup so far."""
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0))


class WorkersBench(VariantBench):
    """VariantBench with pinned, quota-limited gateways and CPU read per gateway."""

    def __init__(self, args: argparse.Namespace, variants: list[Variant]) -> None:
        super().__init__(args, variants, topic_prefix="workers-", group_prefix="workers-")
        self.quota = WorkerQuota(args.core_share)
        self.groups: dict[str, list[Path]] = {}
        self.cpus = os.cpu_count() or 1
        self.tools_cpu = self.cpus - 1
        self.on_close: Any = lambda: None  # fills the report before the document is written
        self.idle: dict[str, float] = {}
        self.rss: dict[
            str, list[float]
        ] = {}  # resident MB of each gateway process at rest  # CPU-s per s of each gateway at rest
        self.cpu: dict[str, dict[str, list[float]]] = {}  # target -> kind -> [cpu_s, GB]

    def start(self, prepare: Any = None) -> None:
        tools = set(range(1, self.cpus)) or {0}
        os.sched_setaffinity(0, tools)  # brokers and load tools inherit it
        missing = "" if self.quota.available else " NOT APPLIED (needs root and cgroup v1 cpu)"
        say(f"brokers and load tools on CPUs {sorted(tools)}; gateways on CPU 0, "
            f"core share {self.quota.share} per worker{missing}")  # fmt: skip
        super().start(prepare)
        time.sleep(2.0)  # start-up work done
        before = {t: sum(sysinfo.process_cpu_s(p) for p in self._pids(t)) for t in self.gateways}
        time.sleep(self.a.idle_s)
        for target in self.gateways:
            cpu = sum(sysinfo.process_cpu_s(p) for p in self._pids(target)) - before[target]
            self.idle[target] = cpu / self.a.idle_s
            self.rss[target] = [rss_mb(pid) for pid in self._pids(target)]
            say(f"  {target}: idle CPU {self.idle[target]:.4f} s/s, resident MB per process "
                f"{self.rss[target]} (supervisor first when there is one)")  # fmt: skip

    def _gateway(self, variant: Variant) -> GatewayProcess:
        assert self.cluster is not None
        gw = start_variant(
            self.cluster.bootstrap_servers, self.workdir, variant, self.a.nodes, SlowHostGateway
        )
        assert gw.pid is not None
        workers = workers_of(gw.pid) or [gw.pid]  # one worker: the process itself
        pin(gw.pid, "0")
        groups = []
        for index, pid in enumerate(workers):
            pin(pid, "0")
            group = self.quota.limit(f"{variant.name}-{index}", pid)
            if group is not None:
                groups.append(group)
        self.groups[variant.name] = groups
        say(f"  {variant.name}: pids {workers} pinned to CPU 0, {self.quota.share} CPU each")
        return gw

    def _pids(self, target: str) -> list[int]:
        gw = self.gateways.get(target)
        if gw is None or gw.pid is None:
            return []
        return [gw.pid, *workers_of(gw.pid)]

    def one_round(self, target: str, rnd: int) -> None:
        assert self.cluster is not None
        a, pids = self.a, self._pids(target)
        bootstrap, topic = self.bootstrap(target), self._topic(target, rnd)
        stats_before = [throttled(g) for g in self.groups.get(target, [])]
        runs: list[tuple[str, list[str], str]] = [
            ("produce", perf.producer_args(topic, bootstrap, a.records, a.record_size, 16384, 5,
                                           -1), "producer-perf"),
            ("paced", perf.producer_args(topic + "-paced", bootstrap, a.paced_records,
                                         a.record_size, 16384, 5, a.paced_rate), "producer-perf"),
        ]  # fmt: skip
        for index in range(a.consume_passes):
            args = perf.consumer_args(topic, bootstrap, a.records, 120_000)
            runs.append(("consume", [*args, "--group", f"workers-{target}-{rnd}-{index}"],
                         "consumer-perf"))  # fmt: skip
        for kind, args, tool in runs:
            cpu0, t0 = sum(sysinfo.process_cpu_s(p) for p in pids), time.monotonic()
            if tool == "producer-perf":
                result = perf.parse_producer(self._tool(tool, args)).as_dict()
                records = a.paced_records if kind == "paced" else a.records
            else:
                consumed = perf.parse_consumer(self._tool(tool, args))
                if consumed.records < a.records:
                    raise RuntimeError(f"{target}: consumed {consumed.records} of {a.records}")
                result, records = consumed.as_dict(), a.records
            cpu = sum(sysinfo.process_cpu_s(p) for p in pids) - cpu0
            net = max(0.0, cpu - self.idle.get(target, 0.0) * (time.monotonic() - t0))
            self._record(target, rnd, kind, result)
            row = self.cpu.setdefault(target, {}).setdefault(kind, [0.0, 0.0, 0.0])
            row[0] += cpu
            row[1] += net
            row[2] += records * a.record_size / 1e9
        stats = [throttled(g) for g in self.groups.get(target, [])]
        pct = [
            round(100 * (t1 - t0) / max(1, p1 - p0), 1)
            for (p0, t0), (p1, t1) in zip(stats_before, stats, strict=True)
        ]
        self.runs[-1]["workers_throttled_pct"] = pct
        if pids:
            say(f"  {target:<16} r{rnd} workers throttled at their quota in {pct} % of periods")

    def cpu_report(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per gateway and direction: CPU-s per GB, raw and net of idle CPU."""
        report: dict[str, dict[str, dict[str, float]]] = {}
        for target, kinds in self.cpu.items():
            if target not in self.gateways:  # direct: no gateway process
                continue
            report[target] = {
                "idle_cpu_s_per_s": {"all": round(self.idle.get(target, 0), 4)},
                "rss_mb": {str(i): v for i, v in enumerate(self.rss.get(target, []))},
            }
            for kind, (cpu, net, gb) in kinds.items():
                if gb > 0 and kind != "paced":
                    report[target][kind] = {"cpu_s_per_gb": round(cpu / gb, 2),
                                            "net_cpu_s_per_gb": round(net / gb, 2),
                                            "gb": round(gb, 3)}  # fmt: skip
        return report

    def close(self) -> None:
        try:
            self.on_close()
            super().close()
        finally:
            self.quota.remove()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument(
        "--core-share",
        type=float,
        default=0.4,
        help="CPU fraction each worker may use (its emulated core)",
    )
    parser.add_argument(
        "--consume-passes",
        type=int,
        default=3,
        help="times what was produced is consumed per round",
    )
    parser.add_argument(
        "--idle-s", type=float, default=10.0, help="seconds each gateway's idle CPU is measured for"
    )
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 20 000 records, one round, 2 passes")  # fmt: skip
    parser.set_defaults(records=100_000, paced_records=10_000, paced_rate=2000)
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.rounds, args.consume_passes = 20_000, 1, 2
        args.paced_records, args.idle_s = 4000, 3.0
    variants = [
        Variant("workers-1", {"server": {"workers": 1}}),
        Variant("workers-2", {"server": {"workers": 2}}),
    ]
    bench = WorkersBench(args, variants)
    cpu: dict[str, Any] = {}
    extra = {"cgroup_quota": bench.quota.available, "gateway_cpu": cpu,
             "load1_at_start": round(os.getloadavg()[0], 2)}  # fmt: skip
    bench.on_close = lambda: cpu.update(bench.cpu_report())
    code, doc = run("workers", bench, [("workers-2", "workers-1"), ("workers-2", "direct")],
                    extra)  # fmt: skip
    for target, kinds in cpu.items():
        for kind, v in kinds.items():
            if kind == "rss_mb":
                say(f"gateway {target} resident MB per process: {list(v.values())}")
            elif "net_cpu_s_per_gb" in v:
                say(f"gateway CPU {target} {kind}: {v['cpu_s_per_gb']} s/GB, "
                    f"{v['net_cpu_s_per_gb']} s/GB net of idle")  # fmt: skip
            else:
                say(f"gateway CPU {target} at rest: {v['all']} s/s")
    ratio = doc["ratios"].get("workers-2/workers-1", {})
    for key in ("produce_mb_per_s", "consume_mb_per_s"):
        if key in ratio:
            verdict = "met" if ratio[key] >= TARGET_RATIO else "missed"
            load1 = os.getloadavg()[0]
            busy = ", contended" if load1 > (os.cpu_count() or 1) else ""
            say(f"scaling {key}: {ratio[key]:.2f} x with 2 workers (target >= {TARGET_RATIO}: "
                f"{verdict}; load average {load1:.1f}{busy})")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
