"""What the machine is and how busy it is: /proc readings for the benchmark report."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone or unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def process_detail(pid: int | None) -> dict[str, float]:
    """Where a process's time went: user and system CPU seconds and read and write
    system calls (all its threads), and its main thread's context switches (the event
    loop's: voluntary, it waited for work; involuntary, it was preempted). Empty when
    the process is gone or unknown."""
    if pid is None:
        return {}
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
        io = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        status = dict(
            line.split(":\t", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":\t" in line
        )
    except (OSError, IndexError, ValueError):
        return {}
    return {
        "user_s": int(fields[11]) / _TICK,
        "system_s": int(fields[12]) / _TICK,
        "read_calls": float(io["syscr"]),
        "write_calls": float(io["syscw"]),
        "voluntary_switches": float(status["voluntary_ctxt_switches"].strip()),
        "involuntary_switches": float(status["nonvoluntary_ctxt_switches"].strip()),
    }


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs since boot; iowait counts as idle."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])  # guest time is already inside user
    return total - idle, total


@dataclass
class CpuWindow:
    """CPU used by the gateway, the brokers and the whole machine between start and stop."""

    gateway_pid: int | None
    broker_pids: list[int]

    def __post_init__(self) -> None:
        self._wall = time.monotonic()
        self._gateway = process_cpu_s(self.gateway_pid)
        self._detail = process_detail(self.gateway_pid)
        self._brokers = sum(process_cpu_s(pid) for pid in self.broker_pids)
        self._machine = machine_ticks()
        self._load = os.getloadavg()[0]

    def stop(self) -> dict[str, float]:
        wall = max(time.monotonic() - self._wall, 1e-9)
        busy, total = machine_ticks()
        d_busy, d_total = busy - self._machine[0], total - self._machine[1]
        gateway = process_cpu_s(self.gateway_pid) - self._gateway
        brokers = sum(process_cpu_s(pid) for pid in self.broker_pids) - self._brokers
        detail = process_detail(self.gateway_pid)
        spent = {  # where the gateway's time went: user, system, reads, waits
            f"gateway_{name}": round(value - self._detail[name], 2)
            for name, value in detail.items()
            if name in self._detail
        }
        return {
            "wall_s": round(wall, 3),
            "gateway_cpu_s": round(gateway, 2),
            **spent,
            "gateway_cores": round(gateway / wall, 3),
            "brokers_cpu_s": round(brokers, 2),
            "brokers_cores": round(brokers / wall, 3),
            "machine_busy_pct": round(100.0 * d_busy / d_total, 1) if d_total else 0.0,
            "load1_before": round(self._load, 2),
            "load1_after": round(os.getloadavg()[0], 2),
        }


def cpu_pressure() -> dict[str, float] | None:
    """Linux PSI: % of time some runnable task waited for a CPU (avg10/avg60/avg300)."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(part.split("=", 1) for part in line.split()[1:])
    return {k: float(v) for k, v in fields.items() if k.startswith("avg")}


def busy_pct(seconds: float) -> float:
    """Share of all CPUs busy over the next ``seconds`` (the load before we start)."""
    busy0, total0 = machine_ticks()
    time.sleep(seconds)
    busy1, total1 = machine_ticks()
    return round(100.0 * (busy1 - busy0) / max(total1 - total0, 1), 1)


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout or out.stderr).decode(errors="replace").strip()
    return text.splitlines()[0] if text else "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return 0


def _package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info(repo: Path, java: str, kafka_version: str) -> dict[str, Any]:
    """nproc, CPU, memory, Python, Java, Kafka, uvloop and the repository's commit."""
    commit = _first_line(["git", "-C", str(repo), "rev-parse", "HEAD"])
    dirty = _first_line(["git", "-C", str(repo), "status", "--porcelain", "--", "gateway"])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "mem_total_mb": _mem_total_mb(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "uvloop": _package_version("uvloop"),
        "kio": _package_version("kio"),
        "java": _first_line([java, "-version"]),
        "kafka_version": kafka_version,
        "git_commit": commit,
        "gateway_tree_dirty": dirty not in ("", "unknown"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "cpu_pressure_start": cpu_pressure(),
    }
