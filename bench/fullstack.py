"""Full-stack benchmark (issue 16): what a production tenant listener costs, in one run.

``python -m bench.fullstack [--quick] [--records N] [--rounds N] [--profile]`` starts
one 3-node Kafka cluster whose brokers have a PLAINTEXT listener (inter-broker
traffic) and an SSL listener (TLS 1.3, the server certificate from ``gateway.tls.ca``),
a redis-server and four gateways, then measures six targets, whose order rotates
from round to round:

- ``direct``       the brokers' PLAINTEXT listener
- ``direct-tls``   the brokers' SSL listener, the clients' TLS settings as below
- ``gateway``      the gateway, plaintext both sides, nothing enabled
- ``gateway-tls``  the gateway's TLS 1.3 listener, nothing else enabled
- ``full-scram``   TLS 1.3 + SASL SCRAM-SHA-512 (credential store made at run time) +
                   authorization (``bench.authz``'s policy: >= 10,000 lines, hundreds
                   of tenants) + quotas in Redis charged on every request, far above
                   what the machine reaches + the access log to rotating files +
                   ``/metrics`` (since 27 Nov 23:08 UTC, as ``deploy/`` runs it)
- ``full-mtls``    the same with client certificates (mTLS) instead of SCRAM

Phases, as in ``bench.run``: a warm-up per target (not counted), produce at full
rate, consume (fetch-phase MB/s) from what ``direct`` wrote in round 1, then
produce paced at half and at a quarter of the direct plaintext max rate (p99 of Kafka's
tool), then the paired latency probe (``bench.latency``: every target at once, librdkafka,
warm-up not counted; issue 16's p99 target is read from it). The gateways' CPU time
(``/proc``) over the payload bytes moved gives CPU seconds per GB. Prints medians, the
ratios of the same run and issue 16's targets, warns when the machine was contended,
and writes ``bench/results/fullstack-<stamp>.json`` and ``fullstack-latest.json``
(``fullstack-quick-*`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/fullstack.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import authz, latency, report
from bench.accesslog import count_records
from bench.fullstack_report import FULL, GB, PAIRS, TARGETS, summarize, table, verdicts
from bench.identities import sasl_lines
from bench.quotas import UNREACHABLE, _grant
from bench.run import (
    NODES,
    PARTITIONS,
    REPLICATION,
    REPO,
    Bench,
    Settings,
    execute,
    interrupt,
    machine_at_end,
    machine_at_start,
    parse_args,
    say,
    write_results,
)
from bench.tls import Pki
from bench.variants import (
    GatewayFactory,
    Variant,
    client_bootstrap,
    ratios,
    start_variant,
)
from gateway.credentials import CredentialStore
from gateway.credentials.file_backend import FileBackend
from gateway.devstack import kafka_dist
from gateway.devstack.gateway_proc import GatewayProcess, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster, NodeSpec
from gateway.devstack.nodes import free_ports
from gateway.quotas.store import RedisQuotaStore
from tests.redis_server import RedisServer

OPERATOR = "User:dev-admin"  # the gateways' plaintext readiness listener, a super user
USER = authz.PRINCIPAL.removeprefix("User:")  # the SCRAM user and the mTLS principal
TLS13 = ["ssl.enabled.protocols=TLSv1.3", "ssl.protocol=TLSv1.3"]
GATEWAYS = tuple(t for t in TARGETS if not t.startswith("direct"))  # what --profile can copy


class TlsListenerCluster(KafkaCluster):
    """A plaintext cluster whose brokers also have an SSL listener for clients."""

    def __init__(self, workdir: Path, nodes: int, pki: Pki) -> None:
        props = pki.broker_props() | {"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.3"}
        super().__init__(workdir, nodes=nodes, extra_broker_props=props)
        taken = {port for n in self.nodes.values() for port in (n.port, n.controller_port)}
        ports = [p for p in free_ports(self.host, nodes + len(taken)) if p not in taken]
        self.ssl_ports = dict(zip(self.nodes, ports[:nodes], strict=True))

    @property
    def ssl_bootstrap(self) -> str:
        return ",".join(f"{self.host}:{self.ssl_ports[i]}" for i in sorted(self.nodes))

    def _properties(self, node: NodeSpec) -> dict[str, str]:
        props = super()._properties(node)
        ssl = f"SSL://{self.host}:{self.ssl_ports[node.node_id]}"
        props["listeners"] += f",{ssl}"
        props["advertised.listeners"] += f",{ssl}"
        props["listener.security.protocol.map"] += ",SSL:SSL"
        return props


def _listener(name: str, tls: dict[str, Any], **settings: Any) -> dict[str, Any]:
    bootstrap, base = pick_ports()
    return {
        "name": name, "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
        "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
        "tls": tls, **settings,
    }  # fmt: skip


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenants", type=int, default=540,
                        help="tenants in the policy (540: about 10,260 lines)")  # fmt: skip
    parser.add_argument("--filler-topics", type=int, help="extra topics (300; quick 60)")
    parser.add_argument("--targets", type=_targets, default=TARGETS,
                        help="comma-separated subset of the targets to run (default: all six); "
                             "the paced phases need 'direct'")  # fmt: skip
    parser.add_argument("--probe-rate", type=float, default=latency.RATE,
                        help=f"the paired latency probe's records/s per target "
                             f"({latency.RATE:.0f}; each record is a request)")  # fmt: skip
    parser.add_argument(
        "--probe-seconds",
        type=float,
        help="seconds each probe round counts (60; quick 15), after 5 s warm-up",
    )
    parser.add_argument(
        "--probe-rounds", type=int, help="probe rounds (3; quick 1): the added p99 is their median"
    )
    parser.add_argument(
        "--equal-rate", type=int, default=0,
        help="also produce at this many records/s to every target (half --records each), "
             "for CPU per GB at one rate; 0: off",
    )  # fmt: skip
    parser.add_argument(
        "--profile-target",
        choices=GATEWAYS,
        default="full-scram",
        help="the gateway --profile profiles a copy of (default full-scram)",
    )


def _targets(value: str) -> tuple[str, ...]:
    chosen = tuple(t.strip() for t in value.split(",") if t.strip())
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"targets are a comma-separated subset of {TARGETS}")
    return tuple(t for t in TARGETS if t in chosen)  # the usual order


class FullStackBench(Bench):
    """``bench.run``'s phases over the six targets; ``self.gateway`` is the plain one."""

    def __init__(self, settings: Settings, workdir: Path, opts: argparse.Namespace) -> None:
        super().__init__(settings, workdir)
        self.opts = opts
        self.pki = Pki.create(workdir / "pki")
        self.policy = authz.policy_lines(opts.tenants)
        self.variants: dict[str, Variant] = {}
        self.gateways: dict[str, GatewayProcess] = {}
        self.redis: RedisServer | None = None
        self.topic_prefix = self.group_prefix = authz.prefix(0)
        self.access_log_records: dict[str, int] = {}
        self.filler_topics: int | None = None
        self.targets: tuple[str, ...] = opts.targets
        self.probes: list[dict[str, Any]] = []
        self._scram_password = ""

    # -- set-up and tear-down -----------------------------------------------------------

    def start(self) -> None:
        say(f"starting a {NODES}-node Kafka {kafka_dist.KAFKA_VERSION} cluster (PLAINTEXT + "
            f"SSL listeners) in {self.workdir}")  # fmt: skip
        cluster = TlsListenerCluster(self.workdir / "kafka", NODES, self.pki)
        self.cluster = cluster
        cluster.start()
        self.redis = RedisServer(self.workdir)
        self.redis.start()
        _grant(RedisQuotaStore(self.redis.url, "kgw:bench:"))
        password = self._scram_password = secrets.token_urlsafe(24)
        asyncio.run(self._scram_user(password))
        self._write_policy()
        self.variants = self._variants()
        for name, variant in self.variants.items():
            self.gateways[name] = start_variant(
                cluster.bootstrap_servers, self.workdir, variant, NODES
            )
        self.gateway = self.gateways["gateway"]
        tls = self.pki.java_props(mtls=False, extra=TLS13, name="tls.properties")
        self.client_props = {
            "direct-tls": tls,
            "gateway-tls": tls,
            "full-scram": self.pki.java_props(
                mtls=False, name="scram.properties", protocol="SASL_SSL",
                extra=[*TLS13, *sasl_lines("SCRAM-SHA-512", USER, password)],
            ),
            "full-mtls": self.pki.java_props(mtls=True, extra=TLS13, name="mtls.properties"),
        }  # fmt: skip
        self._filler_topics()

    async def _scram_user(self, password: str) -> None:
        store = CredentialStore(FileBackend(self.workdir / "credentials.json"))
        try:
            await store.put_scram(USER, "SCRAM-SHA-512", password, iterations=8192, actor="bench")
        finally:
            await store.close()

    def _write_policy(self) -> None:
        policies = self.workdir / "policies"
        policies.mkdir()
        shutil.copy(REPO / "policies" / "model.conf", policies / "model.conf")
        (policies / "policy.csv").write_text("\n".join(self.policy) + "\n")
        say(f"policy: {len(self.policy)} lines for {self.opts.tenants} tenants")

    def _full_sections(self, name: str, scram: bool) -> dict[str, Any]:
        assert self.redis is not None
        access = self.workdir / name / "access" / "access.log"
        sections: dict[str, Any] = {
            "authorization": {
                "policy_dir": str(self.workdir / "policies"), "super_users": [OPERATOR],
            },
            "quotas": {"redis_url": self.redis.url, "key_prefix": "kgw:bench:"},
            "accesslog": {"path": str(access), "max_bytes": 256 * 1024 * 1024, "max_files": 4},
            "metrics": {"port": 0},  # /metrics counts every request, as deployed (0: a free port)
        }  # fmt: skip
        if scram:
            store = {"file": str(self.workdir / "credentials.json")}
            sections["sasl"] = {"mechanisms": ["SCRAM-SHA-512"], "credential_store": store}
        return sections

    def _variants(self) -> dict[str, Variant]:
        tls13 = {"min_version": "TLSv1.3"}
        # the certificate's subject becomes the same principal the SCRAM user has
        mapped = {"principal": {"rules": [f"RULE:^.*CN=bench-client.*$/{USER}/"]}}
        probe = {"principal": OPERATOR}
        out = [
            Variant("gateway"),
            Variant("gateway-tls", {}, probe,
                    [_listener("tls", self.pki.listener_tls("none", **tls13))], 1),
            Variant("full-scram", self._full_sections("full-scram", scram=True), probe,
                    [_listener("tenants", self.pki.listener_tls("none", **tls13),
                               authentication="sasl")], 1),
            Variant("full-mtls", self._full_sections("full-mtls", scram=False), probe,
                    [_listener("tenants", self.pki.listener_tls("required", **tls13, **mapped))],
                    1),
        ]  # fmt: skip
        return {variant.name: variant for variant in out}

    def _filler_topics(self) -> None:
        count = self.opts.filler_topics
        if count is None:
            count = 60 if self.s.mode == "quick" else 300
        self.filler_topics = count
        if count:
            # one partition, one replica each: they are in the metadata every Metadata
            # request filters, but cost the brokers no replication (with 6 x 3 each, 300
            # kept the brokers at 1-1.3 cores while the paced phases moved 0.7 MB/s)
            say(f"creating {count} filler topics (the cluster's metadata, as bench.authz)")
            names = [f"{authz.prefix(i % self.opts.tenants)}filler-{i}" for i in range(count)]
            self.create_topics(names, partitions=1, replication=1)

    def close(self) -> None:
        for name, gw in self.gateways.items():
            if gw is not self.gateway:
                code = gw.stop()
                if code not in (0, None, -signal.SIGTERM, -signal.SIGINT):
                    say(f"gateway {name} exited with {code}; log tail:\n{gw.log_tail()}")
        super().close()
        if self.redis is not None:
            self.redis.stop()

    def create_topics(
        self, names: list[str], partitions: int = PARTITIONS, replication: int = REPLICATION
    ) -> None:
        """Then waits until every broker knows a leader for every new partition. Without
        this wait, the first run on a busy machine had the warm-up producer stall on one
        fresh partition (the leader answered OutOfOrderSequenceException to every retry
        until delivery.timeout.ms); producing into settled partitions has not stalled since."""
        from confluent_kafka.admin import AdminClient

        super().create_topics(names, partitions, replication)
        assert self.cluster is not None
        deadline = time.monotonic() + 60
        for host, port in self.cluster.brokers.values():
            admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
            while True:
                known = admin.list_topics(timeout=10).topics
                if all(
                    name in known and known[name].partitions
                    and all(p.leader >= 0 for p in known[name].partitions.values())
                    for name in names
                ):  # fmt: skip
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {host}:{port}: new partitions without a leader")
                time.sleep(0.5)

    # -- targets --------------------------------------------------------------------------

    def bootstrap(self, target: str, gateway: GatewayProcess | None = None) -> str:
        assert isinstance(self.cluster, TlsListenerCluster)
        if target == "direct":
            return self.cluster.bootstrap_servers
        if target == "direct-tls":
            return self.cluster.ssl_bootstrap
        return client_bootstrap(gateway or self.gateways[target], self.variants[target])

    def librdkafka_config(self, target: str) -> dict[str, str]:
        """The paired probe's client settings for ``target``: those of the Java tools'
        property files, spelt for librdkafka (TLS 1.3 is what every SSL listener allows)."""
        config = {"bootstrap.servers": self.bootstrap(target)}
        if target in ("direct", "gateway"):
            return config
        config |= {"security.protocol": "SSL", "ssl.ca.location": str(self.pki.ca.cert_path)}
        if target == "full-scram":
            config |= {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": USER, "sasl.password": self._scram_password}  # fmt: skip
        elif target == "full-mtls":
            config |= {
                "ssl.certificate.location": self.pki.issued(self.pki.tenant, "client", "pem"),
                "ssl.key.location": self.pki.issued(self.pki.tenant, "client", "key"),
            }
        return config

    def gateway_for(self, target: str, gateway: GatewayProcess | None) -> GatewayProcess | None:
        return gateway or self.gateways.get(target)  # direct targets: no gateway

    def _profiled_gateway(self, factory: GatewayFactory) -> GatewayProcess:
        """A copy of ``--profile-target``'s gateway (its own ports and access log), run
        under the profiler; the load tools reach it as they reach that target."""
        assert self.cluster is not None
        source = self.variants[self.opts.profile_target]
        name = f"{source.name}-profiled"
        sections = source.sections
        if source.name in FULL:
            sections = self._full_sections(name, scram=source.name == "full-scram")
        listeners = []
        for listener in source.extra_listeners:
            moved = dict(listener)
            moved["bootstrap_port"], moved["broker_port_base"] = pick_ports()
            listeners.append(moved)
        profiled = Variant(name, sections, source.listener, listeners, source.client_listener)
        return start_variant(self.cluster.bootstrap_servers, self.workdir, profiled, NODES, factory)

    # -- runs -------------------------------------------------------------------------------

    def _record(
        self, phase: str, rnd: int, target: str, topic: str, throughput: int | None,
        result: dict[str, Any], cpu: dict[str, float],
    ) -> dict[str, Any]:  # fmt: skip
        """Adds the payload bytes moved and the gateway's CPU seconds per GB of them."""
        if "mb" in result:  # ConsumerPerformance: MB of 2^20 bytes
            moved = result["mb"] * 1024 * 1024
        else:
            moved = result["records"] * self.s.record_size
        cpu = {**cpu, "bytes": moved}
        if target in self.gateways:
            cpu["gateway_cpu_s_per_gb"] = round(cpu["gateway_cpu_s"] / (moved / GB), 3)
        return super()._record(phase, rnd, target, topic, throughput, result, cpu)

    def measure(self) -> None:
        s = self.s
        rounds = range(1, s.rounds + 1)

        def topic(phase: str, target: str, rnd: int) -> str:
            return f"{self.topic_prefix}bench-{phase}-{target}-{rnd}"

        targets = self.targets

        def order(rnd: int) -> list[str]:  # no target always first or last
            shift = (rnd - 1) % len(targets)
            return [*targets[shift:], *targets[:shift]]

        paced = "direct" in targets  # the paced rates are shares of the direct max
        phases: tuple[str, ...] = ("produce", "half", "quarter") if paced else ("produce",)
        equal_rate = self.opts.equal_rate
        if equal_rate > 0:
            phases += ("equal",)
        self.create_topics(
            [topic(p, t, r) for p in phases for t in targets for r in rounds]
            + [topic("warmup", t, 0) for t in targets]
        )
        say(f"warm-up: {s.warmup_records} records per target, produce and consume (not counted)")
        for t in targets:
            self.produce("warmup", 0, t, topic("warmup", t, 0), s.warmup_records)
            self.consume("warmup", 0, t, topic("warmup", t, 0), records=s.warmup_records)
        say(f"produce at full rate: {s.records} x {s.record_size} B, {s.rounds} round(s)")
        for r in rounds:
            for t in order(r):
                self.produce("produce", r, t, topic("produce", t, r), s.records)
        consume_topic = topic("produce", "direct" if paced else targets[0], 1)
        say(f"consume {s.consume_records} records from {consume_topic}, {s.rounds} round(s)")
        for r in rounds:
            for t in order(r):
                self.consume("consume", r, t, consume_topic)
        if not paced:
            say("no paced phases: they need the 'direct' target")
        direct_max = report.medians(self.runs)["produce"]["direct"]["records_per_s"] if paced else 0
        for phase, share in (("half", 2), ("quarter", 4)) if paced else ():
            rate, records = max(int(direct_max / share), 1), max(s.records // share, 1000)
            say(f"produce at 1/{share} of the direct max rate: {rate} records/s, {records} records")
            for r in rounds:
                for t in order(r):
                    self.produce(phase, r, t, topic(phase, t, r), records, rate)
        if equal_rate > 0:
            records = max(s.records // 2, 1000)
            say(f"produce at an equal rate: {equal_rate} records/s, {records} records per run")
            for r in rounds:
                for t in order(r):
                    self.produce("equal", r, t, topic("equal", t, r), records, equal_rate)
        self.run_probe(topic)
        time.sleep(2.0)  # the access-log writer runs off the data path: let it catch up
        for name in (t for t in FULL if t in targets):
            logged = count_records(self.workdir / name / "access" / "access.log")
            self.access_log_records[name] = logged
            if logged == 0:
                raise RuntimeError(f"{name} wrote no access-log records")
        if s.profile:
            self.run_profile(consume_topic, target=self.opts.profile_target)

    def run_probe(self, topic: Callable[[str, str, int], str]) -> None:
        """The paired latency probe, every chosen target at once, each round after the
        machine has settled from what ran before it."""
        targets, rate = self.targets, self.opts.probe_rate
        seconds = self.opts.probe_seconds or (15.0 if self.s.mode == "quick" else 60.0)
        rounds = range(1, (self.opts.probe_rounds or (1 if self.s.mode == "quick" else 3)) + 1)
        self.create_topics([topic("probe", t, r) for t in targets for r in rounds])
        say(f"paired latency probe: {rate:.0f} records/s to each of {len(targets)} targets at "
            f"once, {seconds:.0f} s counted after 5 s, {len(rounds)} round(s)")  # fmt: skip
        for r in rounds:
            settled = latency.settle()
            probed = [
                latency.ProbeTarget(t, self.librdkafka_config(t), topic("probe", t, r),
                                    gw.pid if (gw := self.gateways.get(t)) else None)
                for t in targets
            ]  # fmt: skip
            result = latency.probe(probed, rate, 5.0, seconds, self.s.record_size)
            result["usage"]["busy_pct_before"] = settled
            self.probes.append(result)
            p99 = ", ".join(f"{n} {f['p99_ms']:.1f}" for n, f in result["targets"].items())
            busy = result["usage"].get("machine_busy_pct")
            say(f"  round {r}: p99 ms {p99}; machine {busy} % busy")


def main(argv: list[str] | None = None) -> int:
    settings, opts = parse_args(argv, "python -m bench.fullstack", __doc__.split("\n")[0], add_args)
    signal.signal(signal.SIGTERM, interrupt)
    started = time.time()
    machine = machine_at_start()
    bench = FullStackBench(settings, Path(tempfile.mkdtemp(prefix="kgw-bench-fullstack-")), opts)
    try:
        error = execute(bench, opts.keep)
    except KeyboardInterrupt:
        return 130
    machine_at_end(machine)
    summary = summarize(bench.runs)
    rat = ratios(summary, PAIRS)
    command = sys.argv[1:] if argv is None else argv
    doc: dict[str, Any] = {
        "benchmark": "kgw full stack vs direct TLS, direct plaintext and the plain gateway",
        "command": " ".join(["python -m bench.fullstack", *command]),
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "inputs": {**asdict(settings), "tenants": opts.tenants, "policy_lines": len(bench.policy),
                   "filler_topics": bench.filler_topics, "brokers": NODES,
                   "targets": list(bench.targets),
                   "tls": "TLSv1.3 (clients, brokers' SSL listener, gateways)",
                   "quota_per_second": UNREACHABLE,
                   "cpu_per_gb": "gateway CPU s / 1e9 payload bytes"},
        "machine": machine,
        "summary": summary,
        "ratios": rat,
        "targets": verdicts(summary, rat, bench.probes),
        "latency_probe": bench.probes,
        "contention": report.contention(machine, bench.runs),
        "access_log_records": bench.access_log_records,
        "runs": bench.runs,
        "profile": bench.profile,
        "error": error,
    }  # fmt: skip
    latest = write_results(doc, settings.mode, bench.stamp, error is not None, name="fullstack")
    say("\n" + table(doc))
    say(f"\nload average at start {machine['loadavg_start']}, at end {machine['loadavg_end']}; "
        f"results in {latest.relative_to(REPO)}")  # fmt: skip
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
