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
"""

from __future__ import annotations

import argparse
import sys
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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
