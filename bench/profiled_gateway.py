"""``kgw serve`` under a profiler that the benchmark switches on and off with signals.

``python -m bench.profiled_gateway --out PREFIX [--profiler pyinstrument|cprofile]
-- serve --config FILE``. SIGUSR1 starts a profiling window, SIGUSR2 ends it and
writes ``PREFIX-<n>.pstats`` (and, for pyinstrument, ``PREFIX-<n>-tree.txt``), then
``PREFIX-<n>.done`` (the window's wall and CPU seconds) so the caller knows the files
are complete. Handlers run on the main thread, where the event loop runs.

pyinstrument samples the stack (1 ms) and adds little overhead; its time is wall
time, so idle waiting in the event loop appears as self time of the frame that
entered uvloop (``Runner.run``), and on a contended machine time spent runnable but
descheduled lands on whatever frame was running. cProfile traces every call (exact
counts, more overhead) and is timed here with the process's CPU clock, so its own
times are CPU seconds whatever else runs on the machine.
"""

from __future__ import annotations

import argparse
import cProfile
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any


class Window:
    """The profiler state shared by the two signal handlers."""

    def __init__(self, prefix: Path, kind: str) -> None:
        self.prefix = prefix
        self.kind = kind
        self.count = 0
        self.active: Any = None
        self.cpu0 = 0.0
        self.wall0 = 0.0

    def start(self, _signum: int, _frame: FrameType | None) -> None:
        if self.active is not None:
            return
        if self.kind == "pyinstrument":
            from pyinstrument import Profiler  # type: ignore[import-not-found]  # optional

            profiler = Profiler(interval=0.001, async_mode="disabled")
            profiler.start()
            self.active = profiler
        else:
            prof = cProfile.Profile(time.process_time)  # CPU time: immune to other load
            prof.enable()
            self.active = prof
        self.cpu0, self.wall0 = time.process_time(), time.monotonic()

    def stop(self, _signum: int, _frame: FrameType | None) -> None:
        if self.active is None:
            return
        cpu, wall = time.process_time() - self.cpu0, time.monotonic() - self.wall0
        self.count += 1
        base = Path(f"{self.prefix}-{self.count}")
        status = "ok"
        try:
            self._write(base)
        except Exception as exc:  # report it to the benchmark rather than kill the gateway
            status = f"error {type(exc).__name__}: {exc}"
        finally:
            self.active = None
        summary = f"kind {self.kind}\nwall_s {wall:.3f}\ncpu_s {cpu:.3f}\nstatus {status}\n"
        Path(f"{base}.done").write_text(summary)

    def _write(self, base: Path) -> None:
        if self.kind == "pyinstrument":
            from pyinstrument.renderers import PstatsRenderer  # type: ignore[import-not-found]

            session = self.active.stop()
            # the renderer returns marshal bytes decoded with surrogateescape
            data = PstatsRenderer().render(session).encode("utf-8", "surrogateescape")
            base.with_suffix(".pstats").write_bytes(data)
            tree = self.active.output_text(unicode=False, color=False)
            Path(f"{base}-tree.txt").write_text(tree)
        else:
            self.active.disable()
            self.active.dump_stats(str(base.with_suffix(".pstats")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profiled_gateway")
    parser.add_argument("--out", type=Path, required=True, help="prefix of the output files")
    parser.add_argument("--profiler", choices=["pyinstrument", "cprofile"], default="cprofile")
    parser.add_argument("gateway_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    args = [a for a in opts.gateway_args if a != "--"]
    window = Window(opts.out, opts.profiler)
    signal.signal(signal.SIGUSR1, window.start)
    signal.signal(signal.SIGUSR2, window.stop)
    from gateway.cli import main as kgw_main

    return kgw_main(args)


if __name__ == "__main__":
    sys.exit(main())
