"""A gateway child run under ``bench.profiled_gateway``, and its report of top functions."""

from __future__ import annotations

import importlib.util
import io
import os
import pstats
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from gateway.devstack.gateway_proc import GatewayProcess

REPO = Path(__file__).resolve().parent.parent
TOP = 30


def profiler_available() -> bool:
    return importlib.util.find_spec("pyinstrument") is not None


class ProfiledGateway(GatewayProcess):
    """``kgw serve`` inside the profiling launcher; windows opened and closed by signal."""

    def __init__(self, workdir: Path, config: dict[str, Any], prefix: Path, profiler: str) -> None:
        super().__init__(workdir, config)
        self.prefix = prefix
        self.profiler = profiler

    def start(
        self, expected_brokers: int | None, timeout: float = 60, detach: bool = False
    ) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        argv = [
            sys.executable, "-m", "bench.profiled_gateway",
            "--out", str(self.prefix), "--profiler", self.profiler,
            "--", "serve", "--config", str(self.config_path),
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=REPO, env=env,
                start_new_session=detach,
            )  # fmt: skip
        self.pid = self.proc.pid
        if expected_brokers is None:
            self.wait_listening(timeout)
        else:
            self.wait_ready(expected_brokers, timeout)

    def begin_window(self) -> None:
        assert self.pid is not None
        os.kill(self.pid, signal.SIGUSR1)
        time.sleep(0.5)  # the handler runs at the loop's next wake-up (at most ~2 s idle)

    def end_window(self, index: int, timeout: float = 120) -> str:
        """Close window ``index`` (1-based); its wall/CPU summary once the files are written."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGUSR2)
        done = Path(f"{self.prefix}-{index}.done")
        deadline = time.monotonic() + timeout
        while not done.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the profiled gateway wrote no {done.name}:\n{self.log_tail()}")
            time.sleep(0.2)
        return " ".join(done.read_text().split())


def top_functions(prefix: Path, index: int, profiler: str) -> str:
    """Top functions by own time and by cumulative time (and pyinstrument's call tree)."""
    stats_path = Path(f"{prefix}-{index}.pstats")
    parts = []
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
        buf = io.StringIO()
        stats = pstats.Stats(str(stats_path), stream=buf)
        stats.strip_dirs().sort_stats(key).print_stats(TOP)
        parts.append(f"=== top {TOP} functions by {title} ({profiler}) ===\n{buf.getvalue()}")
    if profiler == "pyinstrument":
        parts.append(
            "note: pyinstrument samples wall time and cannot see into uvloop (C): time the\n"
            "loop spends waiting in epoll, and in uvloop's own socket reads and writes, shows\n"
            "as own time of the frame that entered the loop (Runner.run / run_until_complete).\n"
            "On a busy machine, time the process spent runnable but descheduled lands on the\n"
            "frame that was running: compare with the window's cpu_s, or use --profiler cprofile.\n"
        )
        tree = Path(f"{prefix}-{index}-tree.txt")
        if tree.exists():
            parts.append("=== call tree (pyinstrument) ===\n" + tree.read_text())
    else:
        parts.append(
            "note: cProfile traces every call (its overhead inflates call-heavy code) and is\n"
            "timed with the process CPU clock: times are CPU seconds, idle time is in none.\n"
        )
    return "\n".join(parts)
