"""The supervisor process: runs N ``kgw serve`` workers and carries out ``WorkerPool``'s
commands; serves the group's ``/metrics``, ``/healthz`` and ``/readyz``.

Workers are started as ``python -m gateway serve --config <file> --worker-slot i``
(a fresh interpreter, nothing inherited but stdout/stderr and the environment);
each opens the configured listeners with SO_REUSEPORT, so the kernel spreads new
connections over the workers. The supervisor never touches client traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..config import GatewayConfig
from ..observability.endpoint import ObservabilityServer
from .aggregate import Families, Retired, parse, render
from .pool import Command, Exit, RestartPolicy, Signal, Spawn, WorkerPool
from .probe import http_get
from .worker import Status, read_status

log = logging.getLogger("kgw.workers")
TICK_S = 0.1
POLL_S = 1.0  # every worker's /readyz
SCRAPE_S = 5.0  # every worker's /metrics in the background (kept if it dies)
SCRAPE_TIMEOUT_S = 3.0


class _GroupCollector(Collector):
    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    def collect(self) -> list[Metric]:
        return self.supervisor.own_metrics()


class Supervisor:
    """N worker processes for ``config_path`` (already validated as ``config``)."""

    def __init__(self, config_path: Path, config: GatewayConfig, workers: int) -> None:
        self.config_path = config_path
        self.config = config
        server = config.server
        policy = RestartPolicy(max_s=server.restart_max_backoff_s, stable_s=server.restart_stable_s)
        self.pool = WorkerPool(workers, policy, config.shutdown.drain_timeout_s)
        self.directory = Path(tempfile.mkdtemp(prefix="kgw-workers-"))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}  # pid -> process
        self.status: dict[int, Status] = {}  # slot -> what its current worker reported
        self.checks: dict[str, dict[int, bool]] = {}  # readiness check -> slot -> ok
        self.retired = Retired()
        self.latest: dict[int, Families] = {}  # slot -> last exposition read
        self.metrics_server: ObservabilityServer | None = None
        self.signals: list[str] = []
        self._scraped_at = 0.0
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_GroupCollector(self))

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig, what in ((signal.SIGTERM, "stop"), (signal.SIGINT, "stop")):
            loop.add_signal_handler(sig, self.signals.append, what)
        loop.add_signal_handler(signal.SIGHUP, self.signals.append, "reload")
        log.info(
            "starting %d workers",
            self.pool.size,
            extra={"event": "workers_starting", "count": self.pool.size},
        )
        try:
            try:
                await self._serve_endpoint()
            except OSError as exc:  # the metrics port is taken: as a single process would
                log.error("cannot start: %s", exc, extra={"event": "start_failed"})
                return 1
            code = await self._loop()
        finally:
            if self.metrics_server is not None:
                self.metrics_server.close()
            shutil.rmtree(self.directory, ignore_errors=True)
        log.info("all workers stopped", extra={"event": "workers_stopped", "outcome": str(code)})
        return code

    async def _loop(self) -> int:
        code = self._apply(self.pool.start())
        next_poll = 0.0
        while code is None:
            now = time.monotonic()
            commands: list[Command] = []
            while self.signals:
                what = self.signals.pop(0)
                commands += self.pool.stop(now) if what == "stop" else self.pool.reload()
                self._log_signal(what)
            commands += self._reap(now)
            self._check_started()
            commands += self.pool.tick(now)
            code = self._apply(commands)
            if now >= next_poll and self.pool.state == "running":
                next_poll = now + POLL_S
                await self._poll()
            await asyncio.sleep(TICK_S)
        return code

    def _log_signal(self, what: str) -> None:
        event = "workers_draining" if what == "stop" else "workers_reload"
        log.info("%s forwarded to every worker", what, extra={"event": event})

    # -- carrying out the pool's commands --------------------------------------------------

    def _apply(self, commands: list[Command]) -> int | None:
        for command in commands:
            if isinstance(command, Spawn):
                self._spawn(command.slot)
            elif isinstance(command, Signal):
                proc = self.procs.get(command.pid)
                if proc is None:  # exited and reaped since the pool decided to signal it
                    continue
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(command.signum)
            elif isinstance(command, Exit):
                return command.code
        return None

    def _spawn(self, slot: int) -> None:
        argv = [
            sys.executable, "-m", "gateway", "serve", "--config", str(self.config_path),
            "--workers", str(self.pool.size),
            "--worker-slot", str(slot), "--worker-dir", str(self.directory),
        ]  # fmt: skip
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"worker-{slot}.json").unlink()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        self.procs[proc.pid] = proc
        self.status.pop(slot, None)
        self.pool.spawned(slot, proc.pid, time.monotonic())
        log.info("worker started (pid %d)", proc.pid,
                 extra={"event": "worker_started", "worker": slot})  # fmt: skip

    def _reap(self, now: float) -> list[Command]:
        commands: list[Command] = []
        for pid, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.procs[pid]
            slot = next((s.index for s in self.pool.slots if s.pid == pid), None)
            if slot is not None:
                self.status.pop(slot, None)
                self.latest.pop(slot, None)
                for answers in self.checks.values():  # the next worker reports afresh
                    answers.pop(slot, None)
            self.retired.gone(pid)
            level = logging.INFO if self.pool.state != "running" else logging.WARNING
            extra = {"event": "worker_exited", "worker": slot, "outcome": str(code)}
            log.log(level, "worker exited with %s", code, extra=extra)
            commands += self.pool.exited(pid, code, now)
        return commands

    def _check_started(self) -> None:
        for slot in self.pool.slots:
            if slot.pid is None or slot.ready:
                continue
            status = read_status(self.directory, slot.index)
            if status is not None and status.pid == slot.pid:
                self.status[slot.index] = status
                self.pool.ready(slot.index, slot.pid)
                log.info("worker listening", extra={"event": "worker_ready", "worker": slot.index})

    # -- the group's endpoint --------------------------------------------------------------

    async def _serve_endpoint(self) -> None:
        metrics = self.config.metrics
        if metrics is None or not metrics.enabled:
            return
        checks = {"workers": self.pool.all_ready, "cluster": lambda: self._check("cluster"),
                  "policies": lambda: self._check("policies")}  # fmt: skip
        self.metrics_server = ObservabilityServer(
            metrics.bind_host, metrics.port, self.exposition, checks, refresh=self._scrape
        )
        await self.metrics_server.start()

    def _check(self, name: str) -> bool:
        """A worker readiness check passes for the group when it passes on every worker."""
        answers = self.checks.get(name, {})
        return self.pool.all_ready() and all(
            answers.get(slot.index, False) for slot in self.pool.slots
        )

    async def _poll(self) -> None:
        """Every worker's /readyz (and its figures, so a dead worker's counters are kept)."""
        if self.metrics_server is None:
            return
        await asyncio.gather(*(self._read_ready(slot, s) for slot, s in self.status.items()))
        if time.monotonic() - self._scraped_at >= SCRAPE_S:
            await self._scrape()

    async def _read_ready(self, slot: int, status: Status) -> None:
        if status.metrics_port is None:
            return
        code, body = await http_get(status.metrics_port, "/readyz", SCRAPE_TIMEOUT_S)
        for line in body.splitlines():
            name, _, verdict = line.partition(": ")
            if name in ("cluster", "policies"):
                self.checks.setdefault(name, {})[slot] = code in (200, 503) and verdict == "ok"
        if code not in (200, 503):
            for answers in self.checks.values():
                answers[slot] = False

    async def _scrape(self) -> None:
        self._scraped_at = time.monotonic()
        items = [(slot, s) for slot, s in self.status.items() if s.metrics_port is not None]
        replies = await asyncio.gather(
            *(http_get(s.metrics_port or 0, "/metrics", SCRAPE_TIMEOUT_S) for _, s in items)
        )
        for (slot, status), (code, body) in zip(items, replies, strict=True):
            if code != 200:
                continue
            try:
                families = parse(body)
            except ValueError:
                extra = {"event": "worker_metrics_unreadable", "worker": slot}
                log.warning("unreadable worker metrics", extra=extra)
                continue
            if self.status.get(slot) is status:  # still the same worker
                self.latest[slot] = families
                self.retired.seen(status.pid, families)

    def own_metrics(self) -> list[Metric]:
        """The supervisor's own series (the workers' are summed in ``exposition``)."""
        workers = Metric("kgw_workers", "Worker processes, by state", "gauge")
        ready = sum(1 for slot in self.pool.slots if slot.ready)
        workers.add_sample("kgw_workers", {"state": "ready"}, ready)
        workers.add_sample("kgw_workers", {"state": "configured"}, self.pool.size)
        restarts = Metric("kgw_worker_restarts", "Workers started again after dying", "counter")
        restarts.add_sample("kgw_worker_restarts_total", {}, self.pool.restarts())
        return [workers, restarts]

    def exposition(self) -> bytes:
        """The workers' series summed (the dead ones' counters kept), then the
        supervisor's own."""
        summed = render(self.retired.group(list(self.latest.values())))
        return summed.encode() + generate_latest(self._registry)
