"""Worker scaling: the same gateway with ``server.workers`` 1 and 2, when the gateway is
the bottleneck, in one run on one cluster (decision 0030).

``python -m bench.workers [--records N] [--rounds N] [--core-share F]``

A 2-core machine cannot give two workers two cores of their own while the brokers
and the load tools run elsewhere, so the run makes "a core" smaller instead:

- **pinning** (``taskset``): the bench process, hence the brokers and Kafka's load
  tools it starts, runs on the last CPU; the one-worker gateway on CPU 0; worker *i*
  of the two-worker gateway on CPU *i* mod the CPU count (on 2 CPUs worker 1 shares
  the last CPU with the brokers: as far as 2 cores allow);
- **an emulated core per worker** (``--core-share``, default 0.3): each worker process
  gets its own CFS quota (cgroup ``cpu.cfs_quota_us``) of that fraction of a CPU, so
  one worker saturates well below what the brokers can take and the gateway is the
  bottleneck for both targets; ``cpu.stat`` shows each worker hit its quota
  (``throttled_pct``: the share of scheduler periods it was throttled in).

Rounds alternate direct, ``workers-1`` and ``workers-2`` (produce at full rate,
acks=all, then consume what it wrote; the paced run of the shared harness too). The
figure is the ratio ``workers-2 / workers-1`` of MB/s measured in the same run (the
issue's target is >= 0.8 x N = 1.6), with each gateway's CPU seconds per GB from
``/proc`` (the supervisor and every worker). Results: ``bench/results/workers-*.json``.
Needs root for the cgroup; without it the quota is skipped and the report says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/workers.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import sysinfo
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

    def start(self, prepare: Any = None) -> None:
        os.sched_setaffinity(0, {self.tools_cpu})  # brokers and load tools inherit it
        missing = "" if self.quota.available else " NOT APPLIED (needs root and cgroup v1 cpu)"
        say(
            f"brokers and load tools on CPU {self.tools_cpu}; core share {self.quota.share}"
            f"{missing}"
        )
        super().start(prepare)

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
            pin(pid, str(index % self.cpus))
            group = self.quota.limit(f"{variant.name}-{index}", pid)
            if group is not None:
                groups.append(group)
        self.groups[variant.name] = groups
        say(f"  {variant.name}: pids {workers} pinned to CPUs "
            f"{[i % self.cpus for i in range(len(workers))]}")  # fmt: skip
        return gw

    def _pids(self, target: str) -> list[int]:
        gw = self.gateways.get(target)
        if gw is None or gw.pid is None:
            return []
        return [gw.pid, *workers_of(gw.pid)]

    def one_round(self, target: str, rnd: int) -> None:
        pids = self._pids(target)
        cpu_before = sum(sysinfo.process_cpu_s(pid) for pid in pids)
        stats_before = [throttled(g) for g in self.groups.get(target, [])]
        first = len(self.runs)
        super().one_round(target, rnd)
        cpu = sum(sysinfo.process_cpu_s(pid) for pid in pids) - cpu_before
        stats = [throttled(g) for g in self.groups.get(target, [])]
        pct = [
            round(100 * (t1 - t0) / max(1, p1 - p0), 1)
            for (p0, t0), (p1, t1) in zip(stats_before, stats, strict=True)
        ]
        gb = sum(r["result"]["records"] for r in self.runs[first:]) * self.a.record_size / 1e9
        extra = {"gateway_cpu_s": round(cpu, 2), "cpu_s_per_gb": round(cpu / gb, 2) if gb else 0,
                 "throttled_pct": pct}  # fmt: skip
        for row in self.runs[first:]:
            row["round_cpu"] = extra
        if pids:
            say(f"  {target:<16} r{rnd} gateway CPU {cpu:.1f} s ({extra['cpu_s_per_gb']} s/GB, "
                f"all three runs), workers throttled in {pct} % of periods")  # fmt: skip

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.quota.remove()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--core-share", type=float, default=0.3,
                        help="CPU fraction each worker may use (its emulated core)")  # fmt: skip
    parser.set_defaults(records=100_000, paced_records=10_000, paced_rate=2000)
    args = parser.parse_args(argv)
    variants = [
        Variant("workers-1", {"server": {"workers": 1}}),
        Variant("workers-2", {"server": {"workers": 2}}),
    ]
    bench = WorkersBench(args, variants)
    extra = {"tools_cpu": bench.tools_cpu, "cgroup_quota": bench.quota.available,
             "contended": "the machine is shared with other engineers' test runs"}  # fmt: skip
    code, doc = run("workers", bench, [("workers-2", "workers-1"), ("workers-2", "direct")],
                    extra)  # fmt: skip
    ratio = doc["ratios"].get("workers-2/workers-1", {})
    for key in ("produce_mb_per_s", "consume_mb_per_s"):
        if key in ratio:
            verdict = "met" if ratio[key] >= TARGET_RATIO else "missed"
            say(f"scaling {key}: {ratio[key]:.2f} x with 2 workers (target >= {TARGET_RATIO}: "
                f"{verdict}; load average {os.getloadavg()[0]:.1f}, contended)")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
