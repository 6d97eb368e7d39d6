"""Compare gateway configurations against each other and against direct, in one run.

A *variant* is a name and the gateway configuration sections that differ from the
plain dev gateway (``dev_config``). ``VariantBench`` starts one 3-node cluster and one
gateway per variant, then, round by round, runs the same three measurements against
``direct`` and every variant in turn (so drift on a busy machine falls on all of
them): ProducerPerformance at full rate (acks=all; MB/s and p99), a paced
ProducerPerformance run (p99 latency at a fixed rate), and ConsumerPerformance over
what the full-rate run wrote. Medians per target and the ratios asked for are
printed and written to ``bench/results/<name>-latest.json`` plus a timestamped copy.

Used by ``bench.authz`` (authorization on vs off), ``bench.quotas`` and
``bench.identities`` (a SASL cluster: ``cluster_factory``, a second listener the load
tools use, ``client_props`` per target); ``start_variant`` and ``client_bootstrap`` also
by ``bench.fullstack``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import perf, sysinfo
from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
PARTITIONS = 6
REPLICATION = 3
TOOL_TIMEOUT_S = 900


def say(text: str) -> None:
    print(text, flush=True)


@dataclass
class Variant:
    """A gateway under test: its name, config sections, and its listener's settings.

    ``extra_listeners`` follow the first listener (which stays the readiness probe's);
    the load tools use listener ``client_listener``."""

    name: str
    sections: dict[str, Any] = field(default_factory=dict)
    listener: dict[str, Any] = field(default_factory=dict)
    extra_listeners: list[dict[str, Any]] = field(default_factory=list)
    client_listener: int = 0


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--paced-rate", type=int, default=5000, help="records/s of the paced run")
    parser.add_argument("--paced-records", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")


ClusterFactory = Callable[[Path, int], KafkaCluster]
GatewayFactory = Callable[[Path, dict[str, Any]], GatewayProcess]


def start_variant(
    upstream: str, workdir: Path, variant: Variant, nodes: int,
    factory: GatewayFactory = GatewayProcess,
) -> GatewayProcess:  # fmt: skip
    """Start ``variant``'s gateway in front of ``upstream`` (bootstrap servers) and wait
    until its first listener serves the ``nodes`` brokers; ``factory`` makes the process."""
    bootstrap, base = pick_ports()
    config = dev_config(
        upstream, bootstrap, base,
        logging={"level": "WARNING", "format": "json"}, **variant.sections,
    )  # fmt: skip
    config["listeners"][0].update(variant.listener)
    config["listeners"] += variant.extra_listeners
    gw = factory(workdir / variant.name, config)
    try:
        gw.start(expected_brokers=nodes)
    except BaseException:
        gw.stop()
        raise
    say(f"gateway {variant.name}: {client_bootstrap(gw, variant)}")
    return gw


def client_bootstrap(gw: GatewayProcess, variant: Variant) -> str:
    """Where the load tools connect: the variant's ``client_listener``."""
    listener = gw.config["listeners"][variant.client_listener]
    return f"{listener['advertised_host']}:{listener['bootstrap_port']}"


class VariantBench:
    """``cluster_factory(dir, nodes)`` makes the cluster (default: plaintext); the
    admin client that creates topics uses its ``client_config``. ``client_props`` maps
    a target to a properties file the Java tools read (``--producer.config``,
    ``--consumer.config``); it may be filled in by ``prepare``."""

    def __init__(
        self,
        args: argparse.Namespace,
        variants: list[Variant],
        topic_prefix: str = "",
        group_prefix: str = "",
        cluster_factory: ClusterFactory | None = None,
        client_props: dict[str, Path] | None = None,
    ) -> None:
        self.a = args
        self.variants = variants
        self.topic_prefix = topic_prefix
        self.group_prefix = group_prefix
        self.cluster_factory = cluster_factory
        self.client_props = client_props if client_props is not None else {}
        self.workdir = Path(tempfile.mkdtemp(prefix="kgw-bench-variants-"))
        self.cluster: KafkaCluster | None = None
        self.gateways: dict[str, GatewayProcess] = {}
        self.runs: list[dict[str, Any]] = []
        self.load: list[dict[str, Any]] = []

    @property
    def targets(self) -> list[str]:
        return ["direct", *(v.name for v in self.variants)]

    # -- components -------------------------------------------------------------------

    def start(self, prepare: Callable[[KafkaCluster, Path], None] | None = None) -> None:
        say(f"starting a {self.a.nodes}-node cluster in {self.workdir}")
        if self.cluster_factory is None:
            self.cluster = KafkaCluster(self.workdir / "kafka", nodes=self.a.nodes)
        else:
            self.cluster = self.cluster_factory(self.workdir / "kafka", self.a.nodes)
        self.cluster.start()
        if prepare is not None:
            prepare(self.cluster, self.workdir)
        for variant in self.variants:
            self.gateways[variant.name] = self._gateway(variant)
        topics = [t for target in self.targets for t in self._topics(target)]
        self.create_topics([*topics, f"{self.topic_prefix}bench-warmup"])

    def _gateway(self, variant: Variant) -> GatewayProcess:
        assert self.cluster is not None
        return start_variant(self.cluster.bootstrap_servers, self.workdir, variant, self.a.nodes)

    def create_topics(self, names: list[str]) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        assert self.cluster is not None
        admin = AdminClient(
            {"bootstrap.servers": self.cluster.bootstrap_servers, **self.cluster.client_config}
        )
        rf = min(REPLICATION, self.a.nodes)
        futures = admin.create_topics([NewTopic(n, PARTITIONS, rf) for n in names])
        for future in futures.values():
            future.result(timeout=60)

    def bootstrap(self, target: str) -> str:
        """Where the load tools connect for ``target``."""
        assert self.cluster is not None
        gw = self.gateways.get(target)
        if gw is None:
            return self.cluster.bootstrap_servers
        return client_bootstrap(gw, next(v for v in self.variants if v.name == target))

    def _config_args(self, target: str, option: str) -> list[str]:
        props = self.client_props.get(target)
        return [] if props is None else [option, str(props)]

    def _topics(self, target: str) -> list[str]:
        names = []
        for rnd in range(1, self.a.rounds + 1):
            names += [self._topic(target, rnd), self._topic(target, rnd) + "-paced"]
        return names

    def _topic(self, target: str, rnd: int) -> str:
        return f"{self.topic_prefix}bench-{target}-{rnd}"

    def close(self) -> None:
        for gw in self.gateways.values():
            gw.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if not self.a.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- runs -----------------------------------------------------------------------------

    def _tool(self, tool: str, args: list[str]) -> str:
        assert self.cluster is not None
        proc = self.cluster.run_tool(tool, args, timeout=TOOL_TIMEOUT_S)
        out = proc.stdout.decode(errors="replace")
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            raise RuntimeError(f"{tool} exited with {proc.returncode}:\n{(out + err)[-3000:]}")
        return out

    def one_round(self, target: str, rnd: int) -> None:
        assert self.cluster is not None
        a = self.a
        bootstrap = self.bootstrap(target)
        producer_config = self._config_args(target, "--producer.config")
        topic = self._topic(target, rnd)
        for kind, name, rate, records in (
            ("produce", topic, -1, a.records),
            ("paced", topic + "-paced", a.paced_rate, a.paced_records),
        ):
            args = perf.producer_args(name, bootstrap, records, a.record_size, 16384, 5, rate)
            result = perf.parse_producer(self._tool("producer-perf", args + producer_config))
            self._record(target, rnd, kind, result.as_dict())
        args = perf.consumer_args(topic, bootstrap, a.records, 120_000)
        args += ["--group", f"{self.group_prefix}bench-{target}-{rnd}"]
        args += self._config_args(target, "--consumer.config")
        consumed = perf.parse_consumer(self._tool("consumer-perf", args))
        if consumed.records < a.records:
            raise RuntimeError(f"{target}: consumed {consumed.records} of {a.records}")
        self._record(target, rnd, "consume", consumed.as_dict())

    def _record(self, target: str, rnd: int, kind: str, result: dict[str, Any]) -> None:
        self.runs.append({"target": target, "round": rnd, "kind": kind, "result": result})
        rate = f"{target:<16} r{rnd} {kind:<7} {result['mb_per_s']:8.1f} MB/s"
        say(f"  {rate}" + ("" if kind == "consume" else f"  p99 {result['p99_ms']} ms"))

    def warm_up(self) -> None:
        """Not counted: one short produce and consume per target (JIT, page cache, groups)."""
        assert self.cluster is not None
        records = max(1000, min(self.a.records // 4, 50_000))
        say(f"warm-up: {records} records per target")
        for target in self.targets:
            bootstrap = self.bootstrap(target)
            topic = f"{self.topic_prefix}bench-warmup"
            args = perf.producer_args(topic, bootstrap, records, self.a.record_size, 16384, 5)
            self._tool("producer-perf", args + self._config_args(target, "--producer.config"))
            args = perf.consumer_args(topic, bootstrap, records, 120_000)
            args += ["--group", f"{self.group_prefix}warmup-{target}"]
            self._tool("consumer-perf", args + self._config_args(target, "--consumer.config"))

    def measure(self) -> None:
        self.warm_up()
        for rnd in range(1, self.a.rounds + 1):
            for target in self.targets:
                load1 = round(os.getloadavg()[0], 2)
                self.load.append({"round": rnd, "target": target, "load1_before": load1})
                self.one_round(target, rnd)

    # -- results ----------------------------------------------------------------------------

    def summary(self) -> dict[str, dict[str, float]]:
        return summarize(self.runs, self.targets)


def summarize(runs: list[dict[str, Any]], targets: Sequence[str]) -> dict[str, dict[str, float]]:
    """Medians per target with a complete set of runs: produce MB/s and p99, paced p99,
    consume MB/s."""
    out: dict[str, dict[str, float]] = {}
    for target in targets:
        mine = [r for r in runs if r["target"] == target]
        if not {"produce", "paced", "consume"} <= {r["kind"] for r in mine}:
            continue

        def med(kind: str, key: str, rows: list[dict[str, Any]] = mine) -> float:
            return float(statistics.median(r["result"][key] for r in rows if r["kind"] == kind))

        out[target] = {
            "produce_mb_per_s": med("produce", "mb_per_s"),
            "produce_p99_ms": med("produce", "p99_ms"),
            "paced_p99_ms": med("paced", "p99_ms"),
            "consume_mb_per_s": med("consume", "mb_per_s"),
        }
    return out


def ratios(
    summary: dict[str, dict[str, float]], pairs: Sequence[tuple[str, str]]
) -> dict[str, dict[str, float]]:
    out = {}
    for a, b in pairs:
        if a in summary and b in summary:
            out[f"{a}/{b}"] = {
                key: round(summary[a][key] / summary[b][key], 3) if summary[b][key] else 0.0
                for key in summary[a]
                if key in summary[b]
            }
    return out


def run(
    name: str,
    bench: VariantBench,
    pairs: list[tuple[str, str]],
    extra: dict[str, Any],
    prepare: Callable[[KafkaCluster, Path], None] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Start, measure, stop; print and write ``bench/results/<name>-*.json``."""
    failed = False
    baseline = sysinfo.busy_pct(3.0)
    machine = sysinfo.machine_info(REPO, kafka_dist.java_executable(), kafka_dist.KAFKA_VERSION)
    machine["busy_pct_before_start"] = baseline
    say(f"machine busy before start: {baseline:.0f}% (load {os.getloadavg()[0]:.1f})")
    try:
        bench.start(prepare)
        bench.measure()
    except BaseException as exc:
        failed = True
        say(f"benchmark failed: {exc}")
        if not isinstance(exc, Exception):
            raise
    finally:
        bench.close()
    summary = bench.summary()
    rat = ratios(summary, pairs)
    doc = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": vars(bench.a) | extra,
        "machine": machine | {"loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "summary": summary,
        "ratios": rat,
        "load": bench.load,
        "runs": bench.runs,
        "complete": not failed,
    }
    say("\nmedians:")
    for target, row in summary.items():
        say(f"  {target:<16} " + "  ".join(f"{k} {v:.1f}" for k, v in row.items()))
    say("ratios:")
    for label, row in rat.items():
        say(f"  {label:<30} " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(doc, indent=2) + "\n"
    (RESULTS / f"{name}-{stamp}.json").write_text(text)
    (RESULTS / f"{name}-latest.json").write_text(text)
    say(f"results: {RESULTS / f'{name}-latest.json'}")
    return (1 if failed else 0), doc
