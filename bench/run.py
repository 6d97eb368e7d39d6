"""Gateway vs direct: Kafka's ProducerPerformance and ConsumerPerformance, in one run.

``python -m bench.run [--quick] [--rounds N] [--profile]`` starts a fresh 3-node
Kafka cluster and a gateway in front of it, then measures, alternating direct and
gateway runs in each round: produce at full rate, consume, and produce at half the
direct full rate (for latency). It prints medians and gateway/direct ratios against
the targets and writes ``bench/results/latest.json`` plus a timestamped copy
(``quick-*`` names for ``--quick``). See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import perf, report, sysinfo
from bench.profiling import ProfiledGateway, profiler_available, top_functions
from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
NODES = 3
PARTITIONS = 6
REPLICATION = 3
TOOL_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Settings:
    """Everything that decides what is measured (recorded in the results)."""

    mode: str
    records: int
    half_records: int
    consume_records: int
    warmup_records: int
    record_size: int
    batch_size: int
    linger_ms: int
    rounds: int
    consume_timeout_ms: int
    profile: bool
    profiler: str | None


def parse_args(
    argv: list[str] | None,
    prog: str = "python -m bench.run",
    description: str = __doc__.split("\n")[0],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Settings, argparse.Namespace]:
    """The settings; ``extra`` adds a harness's own options (in the namespace returned)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 60 000 records, 1 round")
    parser.add_argument("--records", type=int, help="records per full-rate produce run")
    parser.add_argument(
        "--rounds", type=int, help="rounds per phase, every target in each (default 2)"
    )
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=16384, help="producer batch.size")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also profile the gateway")
    parser.add_argument("--profiler", choices=["pyinstrument", "cprofile"],
                        help="default: pyinstrument if importable, else cProfile")  # fmt: skip
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the temporary directory (logs, configurations; not the brokers' data)",
    )  # fmt: skip
    if extra is not None:
        extra(parser)
    opts = parser.parse_args(argv)
    records = opts.records or (60_000 if opts.quick else 400_000)
    rounds = opts.rounds or (1 if opts.quick else 2)
    profiler = None
    if opts.profile:
        profiler = opts.profiler or ("pyinstrument" if profiler_available() else "cprofile")
    settings = Settings(
        mode="quick" if opts.quick else "full",
        records=records,
        half_records=max(records // 2, 1000),
        consume_records=records,
        warmup_records=min(records // 4, 100_000),
        record_size=opts.record_size,
        batch_size=opts.batch_size,
        linger_ms=opts.linger_ms,
        rounds=rounds,
        consume_timeout_ms=30_000,
        profile=opts.profile,
        profiler=profiler,
    )
    return settings, opts


class Bench:
    """The cluster, the gateway, and every run made against them."""

    def __init__(self, settings: Settings, workdir: Path) -> None:
        self.s = settings
        self.workdir = workdir
        self.cluster: KafkaCluster | None = None
        self.gateway: GatewayProcess | None = None
        self.runs: list[dict[str, Any]] = []
        self.profile: dict[str, Any] | None = None
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        # subclasses with other targets: client properties files per target (TLS,
        # SASL), a prefix for topic and consumer group names (authorization)
        self.client_props: dict[str, Path] = {}
        self.topic_prefix = ""
        self.group_prefix: str | None = None

    # -- set-up and tear-down -----------------------------------------------------

    def start(self) -> None:
        say(f"starting a {NODES}-node Kafka {kafka_dist.KAFKA_VERSION} cluster in {self.workdir}")
        self.cluster = KafkaCluster(self.workdir / "kafka", nodes=NODES)
        self.cluster.start()
        self.gateway = self._new_gateway("gateway", GatewayProcess)
        say(f"cluster {self.cluster.bootstrap_servers}; gateway {self.gateway.bootstrap}")

    def _new_gateway(
        self, name: str, factory: Callable[[Path, dict[str, Any]], GatewayProcess]
    ) -> GatewayProcess:
        assert self.cluster is not None
        bootstrap_port, base = pick_ports()
        config = dev_config(
            self.cluster.bootstrap_servers, bootstrap_port, base,
            logging={"level": "WARNING", "format": "json"},
        )  # fmt: skip
        gateway = factory(self.workdir / name, config)
        try:
            gateway.start(expected_brokers=NODES)
        except BaseException:
            gateway.stop()
            raise
        return gateway

    def close(self) -> None:
        if self.gateway is not None:
            code = self.gateway.stop()
            if code not in (0, None, -signal.SIGTERM, -signal.SIGINT):  # < 0: killed by signal
                say(f"gateway exited with {code}; log tail:\n{self.gateway.log_tail()}")
        if self.cluster is not None:
            self.cluster.stop()

    def create_topics(
        self, names: list[str], partitions: int = PARTITIONS, replication: int = REPLICATION
    ) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        assert self.cluster is not None
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic(n, partitions, replication) for n in names], operation_timeout=30
        )
        for future in futures.values():
            future.result(timeout=60)

    # -- single runs --------------------------------------------------------------

    def gateway_for(self, target: str, gateway: GatewayProcess | None) -> GatewayProcess | None:
        """The gateway whose CPU a run against ``target`` is charged to."""
        return gateway or self.gateway

    def _config_args(self, target: str, option: str) -> list[str]:
        props = self.client_props.get(target)
        return [] if props is None else [option, str(props)]

    def bootstrap(self, target: str, gateway: GatewayProcess | None = None) -> str:
        assert self.cluster is not None and self.gateway is not None
        if target == "direct":
            return self.cluster.bootstrap_servers
        return (gateway or self.gateway).bootstrap

    def _tool(
        self, tool: str, args: list[str], gateway_pid: int | None
    ) -> tuple[str, dict[str, float]]:
        assert self.cluster is not None
        window = sysinfo.CpuWindow(gateway_pid, list(self.cluster.pids.values()))
        proc = self.cluster.run_tool(tool, args, timeout=TOOL_TIMEOUT_S)
        cpu = window.stop()
        out = proc.stdout.decode(errors="replace")
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            raise RuntimeError(f"{tool} exited with {proc.returncode}:\n{(out + err)[-3000:]}")
        return out, cpu

    def produce(
        self, phase: str, rnd: int, target: str, topic: str, records: int,
        throughput: int = -1, gateway: GatewayProcess | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        args = perf.producer_args(
            topic, self.bootstrap(target, gateway), records, self.s.record_size,
            self.s.batch_size, self.s.linger_ms, throughput,
        )  # fmt: skip
        args += self._config_args(target, "--producer.config")
        gw = self.gateway_for(target, gateway)
        out, cpu = self._tool("producer-perf", args, gw.pid if gw else None)
        result = perf.parse_producer(out).as_dict()
        return self._record(phase, rnd, target, topic, throughput, result, cpu)

    def consume(
        self, phase: str, rnd: int, target: str, topic: str,
        gateway: GatewayProcess | None = None, records: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        wanted = self.s.consume_records if records is None else records
        args = perf.consumer_args(
            topic, self.bootstrap(target, gateway), wanted, self.s.consume_timeout_ms
        )
        args += self._config_args(target, "--consumer.config")
        if self.group_prefix is not None:
            args += ["--group", f"{self.group_prefix}bench-{phase}-{target}-{rnd}"]
        gw = self.gateway_for(target, gateway)
        out, cpu = self._tool("consumer-perf", args, gw.pid if gw else None)
        result = perf.parse_consumer(out).as_dict()
        if result["records"] < wanted:
            raise RuntimeError(f"{target} consumer read {result['records']} of {wanted} records")
        return self._record(phase, rnd, target, topic, None, result, cpu)

    def _record(
        self, phase: str, rnd: int, target: str, topic: str, throughput: int | None,
        result: dict[str, Any], cpu: dict[str, float],
    ) -> dict[str, Any]:  # fmt: skip
        run = {"phase": phase, "round": rnd, "target": target, "topic": topic,
               "throughput_limit": throughput, "result": result, "cpu": cpu}  # fmt: skip
        self.runs.append(run)
        say(describe(run))
        return run

    # -- phases ---------------------------------------------------------------------

    def measure(self) -> None:
        s = self.s
        rounds = range(1, s.rounds + 1)
        produce_topics = {(r, t): f"bench-produce-{t}-{r}" for r in rounds for t in report.TARGETS}
        half_topics = {(r, t): f"bench-half-{t}-{r}" for r in rounds for t in report.TARGETS}
        warmup = {t: f"bench-warmup-{t}" for t in report.TARGETS}
        self.create_topics([*warmup.values(), *produce_topics.values(), *half_topics.values()])
        say(f"warm-up: {s.warmup_records} records each way, produce and consume (not counted)")
        for target in report.TARGETS:
            self.produce("warmup", 0, target, warmup[target], s.warmup_records)
        for target in report.TARGETS:  # also creates __consumer_offsets before it is timed
            self.consume("warmup", 0, target, warmup[target], records=s.warmup_records)
        say(f"produce at full rate: {s.records} x {s.record_size} B, {s.rounds} round(s)")
        for r in rounds:
            for target in report.TARGETS:
                self.produce("produce", r, target, produce_topics[(r, target)], s.records)
        consume_topic = produce_topics[(1, "direct")]
        say(f"consume {s.consume_records} records from {consume_topic}, {s.rounds} round(s)")
        for r in rounds:
            for target in report.TARGETS:
                self.consume("consume", r, target, consume_topic)
        direct_max = report.medians(self.runs)["produce"]["direct"]["records_per_s"]
        rate = max(int(direct_max / 2), 1)
        say(f"produce at half the direct max rate: {rate} records/s, {s.half_records} records")
        for r in rounds:
            for target in report.TARGETS:
                self.produce("half", r, target, half_topics[(r, target)], s.half_records, rate)
        if s.profile:
            self.run_profile(produce_topics[(1, "direct")])

    def run_profile(self, consume_topic: str, target: str = "gateway") -> None:
        """A separate profiled gateway: one produce run and one consume run through it."""
        assert self.s.profiler is not None
        prefix = self.workdir / "profile" / "window"
        prefix.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        profiler = self.s.profiler
        gateway = self._profiled_gateway(lambda d, c: ProfiledGateway(d, c, prefix, profiler))
        assert isinstance(gateway, ProfiledGateway)
        topic = f"{self.topic_prefix}bench-profile"
        self.create_topics([topic])
        out: dict[str, Any] = {"profiler": self.s.profiler, "files": {}}
        try:
            say(f"profiling the gateway ({self.s.profiler}) during a produce and a consume run")
            for index, kind in enumerate(("produce", "consume"), start=1):
                gateway.begin_window()
                if kind == "produce":
                    run = self.produce("profile", 1, target, topic, self.s.records, gateway=gateway)
                else:
                    run = self.consume("profile", 1, target, consume_topic, gateway=gateway)
                window = gateway.end_window(index)
                path = RESULTS / f"profile-{self.stamp}-{kind}.txt"
                head = f"{describe(run)}\nprofile window: {window}\n"
                path.write_text(head + "\n" + top_functions(prefix, index, self.s.profiler))
                out["files"][kind] = str(path.relative_to(REPO))
                say(f"profile written to {path.relative_to(REPO)}")
        finally:
            gateway.stop()
        self.profile = out

    def _profiled_gateway(
        self, factory: Callable[[Path, dict[str, Any]], GatewayProcess]
    ) -> GatewayProcess:
        """The gateway ``run_profile`` measures, started with ``factory``."""
        return self._new_gateway("gateway-profiled", factory)


def describe(run: dict[str, Any]) -> str:
    r, c = run["result"], run["cpu"]
    cpu = (
        f"gateway {c['gateway_cores']:.2f} cores, brokers {c['brokers_cores']:.2f}, "
        f"machine {c['machine_busy_pct']:.0f}%"
    )
    head = f"  {run['phase']:<8} r{run['round']} {run['target']:<10}"
    if "p99_ms" in r:
        return (
            f"{head} {r['records_per_s']:>10,.0f} rec/s {r['mb_per_s']:>7.2f} MB/s "
            f"avg {r['avg_ms']:.1f} p50 {r['p50_ms']} p99 {r['p99_ms']} "
            f"p99.9 {r['p999_ms']} ms | {cpu}"
        )
    return (
        f"{head} {r['fetch_records_per_s']:>10,.0f} rec/s {r['fetch_mb_per_s']:>7.2f} MB/s "
        f"(fetch; {r['mb_per_s']:.2f} MB/s incl. join {r['rebalance_ms']:.0f} ms) | {cpu}"
    )


def say(text: str) -> None:
    print(text, flush=True)


def interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def write_results(doc: dict[str, Any], mode: str, stamp: str, failed: bool, name: str = "") -> Path:
    """``[name-][quick-]<stamp>.json`` and, unless the run failed, ``[name-][quick-]latest.json``
    (``failed-`` comes first)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    prefix = ("failed-" if failed else "") + (f"{name}-" if name else "")
    prefix += "quick-" if mode == "quick" else ""
    text = json.dumps(doc, indent=2) + "\n"
    copy = RESULTS / f"{prefix}{stamp}.json"
    copy.write_text(text)
    if failed:
        return copy
    latest = RESULTS / f"{prefix}latest.json"
    latest.write_text(text)
    return latest


def machine_at_start() -> dict[str, Any]:
    """The machine and how busy it is before anything starts; warns when it is busy."""
    baseline = sysinfo.busy_pct(3.0)
    machine = sysinfo.machine_info(REPO, kafka_dist.java_executable(), kafka_dist.KAFKA_VERSION)
    machine["busy_pct_before_start"] = baseline
    say(f"machine: {machine['nproc']} CPUs, load average {machine['loadavg_start']}, "
        f"{baseline}% busy before start")  # fmt: skip
    if machine["loadavg_start"][0] > 0.5 * (machine["nproc"] or 1):
        say("warning: the machine is already busy; ratios will be skewed by contention")
    return machine


def machine_at_end(machine: dict[str, Any]) -> None:
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    machine["cpu_pressure_end"] = sysinfo.cpu_pressure()


def execute(bench: Bench, keep: bool) -> str | None:
    """Start and measure, then stop everything and remove ``bench.workdir`` unless
    ``keep``. Returns the error that ended the run early (None: none); an interrupt
    (Ctrl-C, SIGTERM) propagates as KeyboardInterrupt once everything is stopped."""
    error: str | None = None
    try:
        bench.start()
        bench.measure()
    except KeyboardInterrupt:
        say("interrupted; cleaning up")
        raise
    except Exception as exc:  # keep what was measured; report the failure below
        error = f"{type(exc).__name__}: {exc}"
        say(f"error: {error}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(Exception):
            bench.close()
        if keep:
            _drop_broker_data(bench.workdir)
            say(f"kept {bench.workdir} (without the brokers' data directories)")
        else:
            shutil.rmtree(bench.workdir, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return error


def _drop_broker_data(workdir: Path) -> None:
    """A kept run keeps its logs, configurations and access logs, not the records: a
    four-gateway ``bench.fullstack`` run leaves 20 GB of segments, and two kept runs
    filled this machine's disk."""
    for data in workdir.glob("kafka/node-*/data"):
        shutil.rmtree(data, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    settings, opts = parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)
    started = time.time()
    machine = machine_at_start()
    bench = Bench(settings, Path(tempfile.mkdtemp(prefix="kgw-bench-")))
    try:
        error = execute(bench, opts.keep)
    except KeyboardInterrupt:
        return 130
    meds = report.medians(bench.runs)
    rats = report.ratios(meds)
    machine_at_end(machine)
    summary: dict[str, Any] = {
        "medians": meds,
        "ratios": rats,
        "targets": report.targets(meds, rats),
        "contention": report.contention(machine, bench.runs),
    }
    doc = {
        "benchmark": "kgw gateway vs direct (Kafka ProducerPerformance/ConsumerPerformance)",
        "command": " ".join(["python -m bench.run", *(argv if argv is not None else sys.argv[1:])]),
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "inputs": {**asdict(settings), "partitions": PARTITIONS, "replication": REPLICATION,
                   "brokers": NODES, "acks": "all", "gateway_log_level": "WARNING"},
        "machine": machine,
        "runs": bench.runs,
        **summary,
        "profile": bench.profile,
        "error": error,
    }  # fmt: skip
    latest = write_results(doc, settings.mode, bench.stamp, failed=error is not None)
    say("")
    say(report.table(summary))
    say(f"\nload average at start {machine['loadavg_start']}, at end {machine['loadavg_end']}; "
        f"results in {latest.relative_to(REPO)}")  # fmt: skip
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
