"""Quota benchmark: what quota accounting costs when nobody is over quota, with the
settings in a file (one instance) and with buckets shared through Redis.

``python -m bench.quotas [--records N] [--rounds N]``

The benchmark's principal has produce, fetch and request quotas far above what the
machine can reach, so every request is charged and nothing is throttled: the
figures are the cost of the accounting itself (and, with Redis, of the leases
drawn in the background; the data path never waits for Redis, docs/quotas.md).
Targets, alternating within each round:

- ``direct``                the brokers
- ``gateway``               no quotas (same listener principal)
- ``gateway-quotas``        quotas from a file store, local buckets
- ``gateway-quotas-redis``  quotas in a real redis-server, shared leased buckets

Results: ``bench/results/quotas-latest.json``; the ratios that answer the question
are ``gateway-quotas/gateway`` and ``gateway-quotas-redis/gateway``.

``--charge-path`` measures the charge alone instead (no cluster, about 25 s;
``bench/quota_charge.py``): its CPU and latency per request with Redis-shared
buckets, and the Redis round trips per request. Results:
``bench/results/quota-charge-latest.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/quotas.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.variants import Variant, VariantBench, add_common_args, run, say
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.quotas.model import Target
from gateway.quotas.store import FileQuotaStore, QuotaStore, RedisQuotaStore
from tests.redis_server import RedisServer

PRINCIPAL = "User:bench-app"
UNREACHABLE = {  # per second: far above what 2 cores move
    "produce_bytes": 10_000_000_000,
    "fetch_bytes": 10_000_000_000,
    "requests": 10_000_000,
}


def _grant(store: QuotaStore) -> None:
    store.set_values(Target.parse(f"principal:{PRINCIPAL}"), UNREACHABLE, "bench")
    store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quotas", description=__doc__)
    add_common_args(parser)
    parser.add_argument(
        "--charge-path",
        action="store_true",
        help="measure the charge alone (CPU, latency, Redis round trips)",
    )
    parser.add_argument(
        "--charge-rate",
        type=float,
        default=2000,
        help="requests per second charged (--charge-path)",
    )
    parser.add_argument("--charge-seconds", type=float, default=10,
                        help="seconds per case (--charge-path)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.charge_path:
        return charge_path(args.charge_rate, args.charge_seconds)
    listener = {"principal": PRINCIPAL}
    file_quotas: dict[str, object] = {}
    redis_quotas: dict[str, object] = {"key_prefix": "kgw:bench:"}
    variants = [
        Variant("gateway", listener=listener),
        Variant("gateway-quotas", {"quotas": file_quotas}, listener),
        Variant("gateway-quotas-redis", {"quotas": redis_quotas}, listener),
    ]
    servers: list[RedisServer] = []

    def prepare(_cluster: KafkaCluster, workdir: Path) -> None:
        store_file = workdir / "quotas.json"
        _grant(FileQuotaStore(store_file))
        file_quotas["store_file"] = str(store_file)
        redis = RedisServer(workdir)
        redis.start()
        servers.append(redis)
        _grant(RedisQuotaStore(redis.url, "kgw:bench:"))
        redis_quotas["redis_url"] = redis.url
        say(f"quotas: file {store_file}, redis {redis.url}")

    bench = VariantBench(args, variants)
    pairs = [
        ("gateway-quotas", "gateway"),
        ("gateway-quotas-redis", "gateway"),
        ("gateway", "direct"),
    ]
    try:
        code, _doc = run("quotas", bench, pairs, {"quota_per_second": UNREACHABLE}, prepare)
    finally:
        for server in servers:
            server.stop()
    return code


def charge_path(rate: float, seconds: float) -> int:
    from bench.quota_charge import measure

    results = measure(rate, seconds)
    for name, figures in results.items():
        say(f"charge path, {name}: {json.dumps(figures)}")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    doc = json.dumps({"when": stamp, "rate": rate, "seconds": seconds, "cases": results}, indent=2)
    for name in (f"quota-charge-{stamp}.json", "quota-charge-latest.json"):
        (out / name).write_text(doc + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
