"""Per-tenant upstream identities against the gateway's shared identity (issue 14).

``python -m bench.identities [--records N] [--rounds N] [--connections N]``

One SASL_PLAINTEXT cluster whose brokers run KRaft's ``StandardAuthorizer`` (deny by
default, the gateway's own login a super user), one tenant onboarded with ``kgw
tenant create``, and three targets that alternate within each round (the order
rotates from round to round):

- ``direct``          the brokers, as their ``admin`` user (SCRAM-SHA-512)
- ``gateway-shared``  a gateway with a SASL PLAIN tenant listener, authorization on,
                      every broker connection logged in as the gateway
                      (``upstream.sasl``, a super user)
- ``gateway-tenant``  the same plus ``upstream.tenant_identities``: each connection
                      logs in to the brokers as ``User:kgw-t-<tenant>`` (SCRAM), which
                      the brokers' ACLs confine to the tenant's namespace

The Java load tools log in to the gateways with the tenant's API key (properties
in a 0600 file, never on a command line). Per round and target: ProducerPerformance
at full rate (acks=all), a paced run, ConsumerPerformance over what the full-rate
run wrote (``bench.variants``). Then connection set-up: ``--connections`` fresh
connections per target, interleaved, each timed from TCP connect through
ApiVersions, SaslHandshake and SaslAuthenticate to the first Metadata answer (the
gateway opens its broker connection, and logs in upstream, only for that request).
``direct-plain`` (the brokers, PLAIN as ``admin``) is timed too, for a direct login
with the mechanism the tenants use.

Results: ``bench/results/identities-latest.json``; the ratios asked for are
``gateway-tenant/gateway-shared`` and each gateway against ``direct``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import shutil
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/identities.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from bench.variants import Variant, VariantBench, add_common_args, run, say
from gateway.devstack.gateway_proc import dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.protocol.codec import decode_response, encode_request
from gateway.upstream.handshake import UpstreamHandshake
from gateway.upstream.identity import drive_login

REPO = Path(__file__).resolve().parent.parent
GATEWAY_USER = "kgw-admin"  # the gateway's own broker login, a super user
OPERATOR = "User:dev-admin"  # the gateways' plaintext ``local`` listener (readiness probe)
TENANT, PLAN = "benchid", "bench"
SHARED, PER_TENANT = "gateway-shared", "gateway-tenant"
PAIRS = [(PER_TENANT, SHARED), (PER_TENANT, "direct"), (SHARED, "direct")]
CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Login:
    """Where and as whom one timed connection logs in."""

    host: str
    port: int
    mechanism: str
    username: str
    password: str = field(repr=False)


def _frame(key: int, version: int, correlation: int, body: Any) -> bytes:
    return encode_request(key, version, correlation, "kgw-bench", body)


async def _read(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def connect_once(login: Login, topic: str) -> tuple[float, ...]:
    """Seconds from TCP connect to: connected, the ApiVersions answer, SASL done and the
    first Metadata answer (the last is the connection's set-up time)."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(login.host, login.port)
    connected = time.perf_counter()
    try:
        hello = ApiVersionsRequest(client_software_name="kgw-bench", client_software_version="1")
        writer.write(_frame(18, 3, 1, hello))
        versions = decode_response(await _read(reader), 18, 3, ApiVersionsResponse)
        if versions.error_code != 0:
            raise RuntimeError(f"ApiVersions error {versions.error_code}")
        hello_done = time.perf_counter()
        await drive_login(
            UpstreamHandshake(login.mechanism, login.username, login.password), reader, writer
        )
        sasl_done = time.perf_counter()
        wanted = MetadataRequestTopic(topic_id=None, name=TopicName(topic))
        request = MetadataRequest(
            topics=(wanted,),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        writer.write(_frame(3, 12, 2, request))
        answer = decode_response(await _read(reader), 3, 12, MetadataResponse)
        done = time.perf_counter()
    finally:
        writer.close()
    errors = [int(t.error_code) for t in answer.topics if t.name == topic]
    if errors != [0]:
        raise RuntimeError(f"Metadata for {topic}: error codes {errors}")
    return tuple(t - start for t in (connected, hello_done, sasl_done, done))


PHASES = ("tcp", "api_versions", "sasl", "metadata")


async def _time_all(
    logins: dict[str, Login], topic: str, count: int
) -> dict[str, list[tuple[float, ...]]]:
    """``count`` timed connections per target, interleaved (the order rotates); per
    connection the ms from TCP connect to the end of each phase."""
    names = list(logins)
    samples: dict[str, list[tuple[float, ...]]] = {name: [] for name in names}
    for index in range(count):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            marks = await asyncio.wait_for(connect_once(logins[name], topic), CONNECT_TIMEOUT_S)
            samples[name].append(tuple(round(t * 1000, 3) for t in marks))
    return samples


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return {
        "n": len(samples_ms),
        "p50_ms": round(statistics.median(samples_ms), 3),
        "p90_ms": round(cuts[89], 3),
        "p99_ms": round(cuts[98], 3),
        "mean_ms": round(statistics.fmean(samples_ms), 3),
        "max_ms": round(max(samples_ms), 3),
    }


def _private_file(path: Path, text: str) -> Path:
    path.touch(mode=0o600)
    path.write_text(text)
    return path


def _jaas(module: str, username: str, password: str) -> str:
    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return f"{module} required username={quoted(username)} password={quoted(password)};"


def sasl_lines(mechanism: str, username: str, password: str) -> list[str]:
    """The Java clients' SASL properties (``sasl.mechanism``, ``sasl.jaas.config``)."""
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    return [
        f"sasl.mechanism={mechanism}",
        "sasl.jaas.config=" + _jaas(module, username, password).replace("\\", "\\\\"),
    ]


def java_props(path: Path, mechanism: str, username: str, password: str) -> Path:
    """Client properties for ProducerPerformance/ConsumerPerformance (mode 0600)."""
    lines = ["security.protocol=SASL_PLAINTEXT", *sasl_lines(mechanism, username, password)]
    return _private_file(path, "\n".join(lines) + "\n")


def _tenant_listener() -> dict[str, Any]:
    bootstrap, base = pick_ports()
    return {
        "name": "tenants", "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
        "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
        "authentication": "sasl",
    }  # fmt: skip


class IdentitiesBench(VariantBench):
    """``bench.variants`` on a SASL cluster with an authorizer, plus connection set-up."""

    def __init__(self, args: argparse.Namespace, notes: dict[str, Any]) -> None:
        self.notes = notes  # written with the results (``settings``)
        self.gateway_password = secrets.token_hex(16)
        self.shared = Variant(SHARED, {}, {"principal": OPERATOR}, [_tenant_listener()], 1)
        self.per_tenant = Variant(PER_TENANT, {}, {"principal": OPERATOR}, [_tenant_listener()], 1)
        super().__init__(args, [self.shared, self.per_tenant], cluster_factory=self._cluster)
        self.tenant: dict[str, str] = {}
        self.logins: dict[str, Login] = {}

    def _cluster(self, workdir: Path, nodes: int) -> KafkaCluster:
        return KafkaCluster(
            workdir, nodes=nodes, security_protocol="SASL_PLAINTEXT",
            sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"),
            sasl_users={GATEWAY_USER: self.gateway_password},
            acl_super_users=(f"User:{GATEWAY_USER}",),
        )  # fmt: skip

    # -- set-up ---------------------------------------------------------------------------

    def _sections(self, cluster: KafkaCluster, tenant_identities: bool) -> dict[str, Any]:
        work = self.workdir
        upstream: dict[str, Any] = {
            "bootstrap_servers": cluster.bootstrap_servers.split(","),
            "metadata_refresh_s": 2.0,
            "connect_timeout_s": 10,
            "sasl": {
                "mechanism": "SCRAM-SHA-512", "username": GATEWAY_USER,
                "password_file": str(work / "upstream.pass"), "timeout_s": 5,
            },
        }  # fmt: skip
        if tenant_identities:
            upstream["tenant_identities"] = {
                "secret_file": str(work / "tenant-upstream.secret"),
                "acl_sync_interval_s": 5.0,
            }
        return {
            "upstream": upstream,
            "sasl": {
                "mechanisms": ["PLAIN"],
                "credential_store": {"file": str(work / "creds.json")},
            },
            "authorization": {"policy_dir": str(work / "policies"), "super_users": [OPERATOR]},
            "quotas": {
                "store_file": str(work / "quotas.json"),
                "plans": {PLAN: {"max_topics": 100, "max_partitions_per_topic": 6}},
            },
        }

    def prepare(self, cluster: KafkaCluster, workdir: Path) -> None:
        """Stores and secrets for both gateways, the tenant, the tools' properties."""
        policies = workdir / "policies"
        policies.mkdir()
        shutil.copy(REPO / "policies" / "model.conf", policies / "model.conf")
        (policies / "policy.csv").write_text("# managed by kgw tenant\n")
        _private_file(workdir / "tenant-upstream.secret", secrets.token_urlsafe(48) + "\n")
        _private_file(workdir / "upstream.pass", self.gateway_password + "\n")
        self.shared.sections.update(self._sections(cluster, tenant_identities=False))
        self.per_tenant.sections.update(self._sections(cluster, tenant_identities=True))
        self._onboard(cluster, workdir)
        self.topic_prefix = self.group_prefix = self.tenant["prefix"]
        admin_password = cluster.sasl_users["admin"]
        direct = java_props(workdir / "direct.properties", "SCRAM-SHA-512", "admin", admin_password)
        tenant = java_props(
            workdir / "tenant.properties", "PLAIN", self.tenant["user"], self.tenant["secret"]
        )
        self.client_props.update({"direct": direct, SHARED: tenant, PER_TENANT: tenant})
        say(f"tenant {TENANT} onboarded: namespace {self.tenant['prefix']}")

    def _onboard(self, cluster: KafkaCluster, workdir: Path) -> None:
        bootstrap, base = pick_ports()
        config = dev_config(cluster.bootstrap_servers, bootstrap, base, **self.shared.sections)
        config["listeners"] += self.shared.extra_listeners
        path = workdir / "onboard.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        bundle = workdir / "bundle"
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "tenant", "create", TENANT, "--plan", PLAN,
             "--bundle-dir", str(bundle), "--json", "--config", str(path)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:  # stderr names no secret; stdout would hold it
            raise RuntimeError(f"kgw tenant create failed ({done.returncode}): {done.stderr}")
        created = json.loads(done.stdout)
        settings = json.loads((bundle / "confluent-kafka.json").read_text())
        self.tenant = {
            "prefix": created["prefix"],
            "user": settings["sasl.username"],
            "secret": settings["sasl.password"],
        }

    def start(self, prepare: Any = None) -> None:
        super().start(self.prepare)
        assert self.cluster is not None
        host, port = self.cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        admin = self.cluster.sasl_users["admin"]
        self.logins = {
            "direct": Login(host, int(port), "SCRAM-SHA-512", "admin", admin),
            "direct-plain": Login(host, int(port), "PLAIN", "admin", admin),
        }
        for target in (SHARED, PER_TENANT):
            gw_host, gw_port = self.bootstrap(target).rsplit(":", 1)
            self.logins[target] = Login(
                gw_host, int(gw_port), "PLAIN", self.tenant["user"], self.tenant["secret"]
            )
        self._wait_usable()

    def _wait_usable(self) -> None:
        """Until the tenant may read its topic's metadata everywhere (the broker ACLs of
        ``User:kgw-t-<tenant>`` are synced by ``gateway-tenant`` at start)."""
        topic = f"{self.topic_prefix}bench-warmup"
        deadline = time.monotonic() + 90
        for name, login in self.logins.items():
            while True:
                try:
                    asyncio.run(asyncio.wait_for(connect_once(login, topic), CONNECT_TIMEOUT_S))
                    break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} not usable: {exc}") from None
                    time.sleep(0.5)

    # -- measurements ---------------------------------------------------------------------

    def measure(self) -> None:
        """As ``VariantBench.measure``, but the order of the targets rotates each round
        (no target is always last, where the machine is warmest), then connections."""
        self.warm_up()
        targets = self.targets
        for rnd in range(1, self.a.rounds + 1):
            shift = (rnd - 1) % len(targets)
            for target in targets[shift:] + targets[:shift]:
                load1 = round(os.getloadavg()[0], 2)
                self.load.append({"round": rnd, "target": target, "load1_before": load1})
                self.one_round(target, rnd)
        self.measure_connections()

    def measure_connections(self) -> None:
        topic = f"{self.topic_prefix}bench-warmup"
        count = self.a.connections
        say(f"connection set-up: {count} per target, interleaved (after 10 not counted)")
        asyncio.run(_time_all(self.logins, topic, 10))
        self.notes["busy_processes_before_connections"] = busy_processes()
        load1 = round(os.getloadavg()[0], 2)
        samples = asyncio.run(_time_all(self.logins, topic, count))
        self.load.append({"round": 0, "target": "connections", "load1_before": load1})
        for target, marks in samples.items():
            values = [m[-1] for m in marks]
            stats = percentiles(values)
            # ms spent in each phase (TCP connect, ApiVersions, SASL, Metadata): p50, p99
            steps = [[m[0]] + [b - a for a, b in itertools.pairwise(m)] for m in marks]
            phases = {}
            for i, phase in enumerate(PHASES):
                spent = percentiles([s[i] for s in steps])
                phases[f"{phase}_p50_ms"] = spent["p50_ms"]
                phases[f"{phase}_p99_ms"] = spent["p99_ms"]
            self.runs.append(
                {"target": target, "round": 0, "kind": "connect",
                 "result": stats | phases | {"samples_ms": values}}
            )  # fmt: skip
            p50, p99 = stats["p50_ms"], stats["p99_ms"]
            split = ", ".join(
                f"{ph} {phases[f'{ph}_p50_ms']:.2f}/{phases[f'{ph}_p99_ms']:.2f}" for ph in PHASES
            )
            say(f"  {target:<16} connect p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  (p50/p99: {split})")

    def summary(self) -> dict[str, dict[str, float]]:
        out = super().summary()
        for target, row in out.items():
            fetch = [
                r["result"]["fetch_mb_per_s"]
                for r in self.runs
                if r["target"] == target and r["kind"] == "consume"
            ]
            row["consume_fetch_mb_per_s"] = float(statistics.median(fetch))
            connect = [
                r["result"] for r in self.runs if r["target"] == target and r["kind"] == "connect"
            ]
            if connect:
                row["connect_p50_ms"] = float(connect[0]["p50_ms"])
                row["connect_p99_ms"] = float(connect[0]["p99_ms"])
        complete = [row for row in out.values() if "connect_p99_ms" in row]
        if complete and len(complete) != len(out):  # ratios need the same keys everywhere
            for row in out.values():
                row.pop("connect_p50_ms", None)
                row.pop("connect_p99_ms", None)
        return out


def busy_processes() -> list[str]:
    """Processes using CPU now (what else ran): command name, ``-m`` module or Java main
    class, %CPU over the process's life. No other argument (no secret) is kept."""
    done = subprocess.run(
        ["ps", "-eo", "pid=,pcpu=,args=", "--sort=-pcpu"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    rows = []
    for line in done.stdout.splitlines()[:20]:
        pid, cpu, args = [*line.split(None, 2), "", "", ""][:3]
        if pid == str(os.getpid()) or float(cpu or 0) < 5.0:
            continue
        words = args.split()
        name = Path(words[0]).name if words else "?"
        if "-m" in words[:-1]:
            name += " -m " + words[words.index("-m") + 1]
        elif name == "java":
            classes = [w for w in words[1:] if not w.startswith("-") and "." in w and "/" not in w]
            name += " " + (classes[0] if classes else "")
        rows.append(f"{name} {cpu}%")
    return rows


def report(doc: dict[str, Any]) -> None:
    summary, ratio_rows = doc["summary"], doc["ratios"]
    keys = [
        ("produce MB/s (full rate)", "produce_mb_per_s"),
        ("paced p99 ms", "paced_p99_ms"),
        ("consume MB/s (fetch phase)", "consume_fetch_mb_per_s"),
        ("connect p50 ms", "connect_p50_ms"),
        ("connect p99 ms", "connect_p99_ms"),
    ]
    targets = [t for t in ("direct", SHARED, PER_TENANT) if t in summary]
    say("\n" + f"{'metric (median of rounds)':<28}" + "".join(f"{t:>16}" for t in targets))
    for label, key in keys:
        cells = [summary[t].get(key) for t in targets]
        say(
            f"{label:<28}"
            + "".join(f"{c:>16.2f}" if c is not None else f"{'-':>16}" for c in cells)
        )
    plain = [r["result"] for r in doc["runs"] if r["target"] == "direct-plain"]
    if plain:
        say(f"direct-plain (admin, PLAIN) connect p50 {plain[0]['p50_ms']:.2f} ms"
            f"  p99 {plain[0]['p99_ms']:.2f} ms")  # fmt: skip
    say("")
    for pair, row in ratio_rows.items():
        parts = [f"{label.split(' (')[0]} {row[key]:.3f}" for label, key in keys if key in row]
        say(f"{pair:<30} " + "  ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.identities", description=__doc__)
    add_common_args(parser)
    parser.add_argument("--connections", type=int, default=200, help="timed per target")
    args = parser.parse_args(argv)
    extra = {
        "tenant": TENANT,
        "targets": {
            "direct": "brokers, SASL SCRAM-SHA-512 as admin",
            SHARED: "gateway, client SASL PLAIN (tenant API key), upstream as the gateway",
            PER_TENANT: "same + upstream.tenant_identities (SCRAM as User:kgw-t-<tenant>)",
        },
        "busy_processes_at_start": busy_processes(),
    }
    code, doc = run("identities", IdentitiesBench(args, extra), PAIRS, extra)
    report(doc)
    return code


if __name__ == "__main__":
    sys.exit(main())
