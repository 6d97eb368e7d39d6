"""TLS benchmark: the gateway's TLS and mTLS listeners against direct plaintext, the
brokers' own SSL listener, and the gateway in plaintext, in one run.

``python -m bench.tls [--records N] [--rounds N] [--nodes N]`` uses Kafka's
ProducerPerformance (acks=all, full rate: throughput and p99 under load; then a
paced run at ``--paced-rate`` records/s: p99 latency) and ConsumerPerformance
against five targets:

- ``direct``      the brokers' PLAINTEXT listener
- ``direct-tls``  the brokers' own SSL listener (a second cluster, SSL only)
- ``gateway``     the gateway, plaintext both sides
- ``gateway-tls`` the gateway's TLS listener (server authentication)
- ``gateway-mtls`` the gateway's mTLS listener (client certificate required)

Certificates and keystores come from ``gateway.tls.ca`` (what ``kgw certs`` runs),
made in a temporary directory. The SSL cluster runs first (it is stopped before the
plaintext cluster starts, so both have the machine to themselves); in the second
phase the targets alternate within each round. Medians and the ratios that matter
(gateway-tls / direct-tls is the issue's target, >= 1.0) are printed and written to
``bench/results/tls-latest.json`` and a timestamped copy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/tls.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import perf
from bench.variants import ratios, summarize
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.tls.ca import CertificateAuthority, parse_san, parse_subject
from gateway.upstream.client import BROKER_ERRORS, BrokerClient

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
TARGETS = ("direct", "direct-tls", "gateway", "gateway-tls", "gateway-mtls")


def say(text: str) -> None:
    print(text, flush=True)


@dataclass
class Pki:
    """Everything TLS: a CA for the gateway and the brokers, one for the client."""

    dir: Path
    ca: CertificateAuthority
    tenant: CertificateAuthority
    password: str = "bench-only-password"

    @classmethod
    def create(cls, root: Path) -> Pki:
        ca = CertificateAuthority.create(root / "servers", parse_subject("CN=Bench Servers CA"))
        tenant = CertificateAuthority.create(root / "tenant", parse_subject("CN=Bench Tenant CA"))
        sans = [parse_san("127.0.0.1"), parse_san("localhost")]
        ca.issue("server", "server", parse_subject("CN=bench-server"), sans, also_client=True)
        tenant.issue("client", "client", parse_subject("CN=bench-client,OU=bench"))
        pki = cls(root, ca, tenant)
        for authority, name in ((ca, "server"), (tenant, "client")):
            authority.export_pkcs12(name, root / f"{name}.p12", pki.password.encode())
        return pki

    def issued(self, ca: CertificateAuthority, name: str, suffix: str) -> str:
        return str(ca.dir / "issued" / f"{name}.{suffix}")

    def broker_props(self) -> dict[str, str]:
        """The brokers' SSL listener settings: the server certificate, no client auth."""
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.dir / "server.p12"),
            "ssl.keystore.password": self.password,
            "ssl.key.password": self.password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.cert_path),
            "ssl.client.auth": "none",
        }

    def listener_tls(self, client_auth: str, **settings: Any) -> dict[str, Any]:
        """A gateway listener's ``tls`` section: the server certificate; client
        certificates from the tenant CA when ``client_auth`` asks for them."""
        return {
            "cert_file": self.issued(self.ca, "server", "pem"),
            "key_file": self.issued(self.ca, "server", "key"),
            "client_auth": client_auth,
            "client_cas": [{"ca_file": str(self.tenant.cert_path)}],
            **settings,
        }

    def java_props(
        self, mtls: bool, extra: Sequence[str] = (), name: str | None = None,
        protocol: str = "SSL",
    ) -> Path:  # fmt: skip
        """SSL settings for Kafka's Java tools (truststore PEM, keystore PKCS#12), then
        ``extra`` lines, in ``name`` (mode 0600: the lines may hold a password)."""
        path = self.dir / (name or ("mtls.properties" if mtls else "tls.properties"))
        lines = [
            f"security.protocol={protocol}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca.cert_path}",
        ]
        if mtls:
            lines += [
                "ssl.keystore.type=PKCS12",
                f"ssl.keystore.location={self.dir / 'client.p12'}",
                f"ssl.keystore.password={self.password}",
                f"ssl.key.password={self.password}",
            ]
        path.touch(mode=0o600)
        path.write_text("\n".join([*lines, *extra]) + "\n")
        return path


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.a = args
        self.workdir = workdir
        self.pki = Pki.create(workdir / "pki")
        self.runs: list[dict[str, Any]] = []
        self.clusters: list[KafkaCluster] = []
        self.gateways: list[GatewayProcess] = []

    # -- components -------------------------------------------------------------------

    def cluster(self, ssl: bool) -> KafkaCluster:
        props: dict[str, str] = {}
        probe: dict[str, str] = {}
        if ssl:
            props = self.pki.broker_props()
            probe = {"security.protocol": "SSL", "ssl.ca.location": str(self.pki.ca.cert_path)}
        name = "kafka-ssl" if ssl else "kafka"
        say(f"starting a {self.a.nodes}-node {'SSL-only' if ssl else 'plaintext'} cluster")
        cluster = KafkaCluster(
            self.workdir / name, nodes=self.a.nodes, extra_broker_props=props,
            security_protocol="SSL" if ssl else "PLAINTEXT", client_config=probe,
        )  # fmt: skip
        self.clusters.append(cluster)
        cluster.start()
        return cluster

    def gateway(self, cluster: KafkaCluster, name: str, client_auth: str | None) -> GatewayProcess:
        bootstrap, base = pick_ports()
        listener: dict[str, Any] = {
            "name": name, "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
            "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
        }  # fmt: skip
        if client_auth is not None:
            listener["tls"] = self.pki.listener_tls(client_auth)
        config = dev_config(
            cluster.bootstrap_servers, bootstrap, base, listeners=[listener],
            logging={"level": "WARNING", "format": "json"},
        )  # fmt: skip
        gw = GatewayProcess(self.workdir / name, config)
        self.gateways.append(gw)
        gw.start(expected_brokers=None)
        self._wait_ready(gw, client_auth)
        return gw

    def _wait_ready(self, gw: GatewayProcess, client_auth: str | None) -> None:
        import ssl

        context = None
        if client_auth is not None:
            context = ssl.create_default_context(cafile=str(self.pki.ca.cert_path))
            context.load_cert_chain(
                self.pki.issued(self.pki.tenant, "client", "pem"),
                self.pki.issued(self.pki.tenant, "client", "key"),
            )
        address = ("127.0.0.1", int(gw.listener["bootstrap_port"]))
        client = BrokerClient([address], tls=context, timeout_s=5.0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                brokers = asyncio.run(client.brokers(address))
            except BROKER_ERRORS:
                brokers = {}
            if len(brokers) >= self.a.nodes:
                return
            time.sleep(0.3)
        raise RuntimeError(f"gateway not ready:\n{gw.log_tail()}")

    def create_topics(self, cluster: KafkaCluster, names: list[str], ssl: bool) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        conf = {"bootstrap.servers": cluster.bootstrap_servers}
        if ssl:
            conf |= {"security.protocol": "SSL", "ssl.ca.location": str(self.pki.ca.cert_path)}
        admin = AdminClient(conf)
        rf = min(3, self.a.nodes)
        for future in admin.create_topics([NewTopic(n, PARTITIONS, rf) for n in names]).values():
            future.result(timeout=60)

    # -- runs -----------------------------------------------------------------------------

    def _tool(self, cluster: KafkaCluster, tool: str, args: list[str]) -> str:
        proc = cluster.run_tool(tool, args, timeout=900)
        out = proc.stdout.decode(errors="replace")
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            raise RuntimeError(f"{tool} exited with {proc.returncode}:\n{(out + err)[-3000:]}")
        return out

    def one_round(
        self, cluster: KafkaCluster, target: str, bootstrap: str, props: Path | None, rnd: int
    ) -> None:
        a = self.a
        extra_p = ["--producer.config", str(props)] if props else []
        extra_c = ["--consumer.config", str(props)] if props else []
        topic, paced = f"bench-{target}-{rnd}", f"bench-{target}-{rnd}-paced"
        for kind, name, rate, records in (
            ("produce", topic, -1, a.records),
            ("paced", paced, a.paced_rate, a.paced_records),
        ):
            args = perf.producer_args(name, bootstrap, records, a.record_size, 16384, 5, rate)
            result = perf.parse_producer(self._tool(cluster, "producer-perf", args + extra_p))
            self._record(target, rnd, kind, result.as_dict())
        args = perf.consumer_args(topic, bootstrap, a.records, 120_000)
        consumed = perf.parse_consumer(self._tool(cluster, "consumer-perf", args + extra_c))
        if consumed.records < a.records:
            raise RuntimeError(f"{target}: consumed {consumed.records} of {a.records}")
        self._record(target, rnd, "consume", consumed.as_dict())

    def warm_up(
        self, cluster: KafkaCluster, target: str, bootstrap: str, props: Path | None
    ) -> None:
        """Not counted: a short produce and consume (JIT, page cache, the group)."""
        records = max(1000, min(self.a.records // 4, 50_000))
        extra_p = ["--producer.config", str(props)] if props else []
        extra_c = ["--consumer.config", str(props)] if props else []
        topic = f"bench-{target}-warmup"
        args = perf.producer_args(topic, bootstrap, records, self.a.record_size, 16384, 5)
        self._tool(cluster, "producer-perf", args + extra_p)
        args = perf.consumer_args(topic, bootstrap, records, 120_000)
        self._tool(cluster, "consumer-perf", args + extra_c)
        say(f"  {target:<13} warmed up ({records} records, not counted)")

    def _record(self, target: str, rnd: int, kind: str, result: dict[str, Any]) -> None:
        self.runs.append({"target": target, "round": rnd, "kind": kind, "result": result})
        if kind == "consume":
            say(f"  {target:<13} r{rnd} consume {result['mb_per_s']:8.1f} MB/s")
        else:
            say(f"  {target:<13} r{rnd} {kind:<7} {result['mb_per_s']:8.1f} MB/s"
                f"  p99 {result['p99_ms']} ms")  # fmt: skip

    def measure(self) -> None:
        rounds = range(1, self.a.rounds + 1)
        ssl_cluster = self.cluster(ssl=True)
        try:
            self.create_topics(ssl_cluster, self._topics("direct-tls"), ssl=True)
            props = self.pki.java_props(mtls=False)
            self.warm_up(ssl_cluster, "direct-tls", ssl_cluster.bootstrap_servers, props)
            for rnd in rounds:
                self.one_round(ssl_cluster, "direct-tls", ssl_cluster.bootstrap_servers, props, rnd)
        finally:
            ssl_cluster.stop()
        cluster = self.cluster(ssl=False)
        gateways = {
            "gateway": self.gateway(cluster, "plain", None),
            "gateway-tls": self.gateway(cluster, "tls", "none"),
            "gateway-mtls": self.gateway(cluster, "mtls", "required"),
        }
        targets = ["direct", *gateways]
        self.create_topics(cluster, [t for x in targets for t in self._topics(x)], ssl=False)

        def where(target: str) -> tuple[str, Path | None]:
            gw = gateways.get(target)
            bootstrap = cluster.bootstrap_servers if gw is None else gw.bootstrap
            props = None
            if target != "direct" and target != "gateway":
                props = self.pki.java_props(mtls=target == "gateway-mtls")
            return bootstrap, props

        for target in targets:
            self.warm_up(cluster, target, *where(target))
        for rnd in rounds:
            for target in targets:
                self.one_round(cluster, target, *where(target), rnd)

    def _topics(self, target: str) -> list[str]:
        names = []
        for rnd in range(1, self.a.rounds + 1):
            names += [f"bench-{target}-{rnd}", f"bench-{target}-{rnd}-paced"]
        return [*names, f"bench-{target}-warmup"]

    def close(self) -> None:
        for gw in self.gateways:
            gw.stop()
        for cluster in self.clusters:
            cluster.stop()


RATIOS = (
    ("gateway-tls", "direct-tls"),  # the issue's target: >= 1.0 throughput
    ("gateway-mtls", "direct-tls"),
    ("gateway-tls", "gateway"),
    ("gateway-tls", "direct"),
    ("direct-tls", "direct"),
    ("gateway", "direct"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls", description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--paced-rate", type=int, default=5000, help="records/s of the paced run")
    parser.add_argument("--paced-records", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kgw-bench-tls-"))
    bench = Bench(args, workdir)
    failed = False
    try:
        bench.measure()
    except BaseException as exc:
        failed = True
        say(f"benchmark failed: {exc}")
        if not isinstance(exc, Exception):
            raise
    finally:
        bench.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    summary = summarize(bench.runs, TARGETS)
    rat = ratios(summary, RATIOS)
    doc = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": vars(args),
        "summary": summary,
        "ratios": rat,
        "runs": bench.runs,
        "complete": not failed,
    }
    say("\nmedians:")
    for target, row in summary.items():
        say(f"  {target:<13} " + "  ".join(f"{k} {v:.1f}" for k, v in row.items()))
    say("ratios:")
    for name, row in rat.items():
        say(f"  {name:<26} " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))
    produce_ratio = rat.get("gateway-tls/direct-tls", {}).get("produce_mb_per_s")
    if produce_ratio is not None:
        verdict = "met" if produce_ratio >= 1 else "NOT met"
        say(f"target gateway-tls >= direct-tls throughput: {verdict} ({produce_ratio:.2f})")
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(doc, indent=2) + "\n"
    (RESULTS / f"tls-{stamp}.json").write_text(text)
    (RESULTS / "tls-latest.json").write_text(text)
    say(f"results: {RESULTS / 'tls-latest.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
