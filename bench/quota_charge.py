"""The quota charge on the hot path, alone: what ``Throttle.on_request`` (the call
``Session.expect`` makes for every forwarded request) costs in CPU and latency with
Redis-shared buckets, and how many Redis round trips the shared limit takes.

``python -m bench.quotas --charge-path [--charge-rate N] [--charge-seconds S]``

A real ``redis-server`` and a ``QuotaEngine`` with its background sync task, in one
event loop; Produce requests of 16 KiB are charged at a paced rate (requests and
produce bytes, as the data path does) under limits that are reached (so leases are
drawn and debts booked) or not. The charge itself never awaits Redis: the figures
are the synchronous call's own time (p50/p99/max in microseconds) and the process's
CPU per request, next to the round trips per second the background task made.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.quotas.engine import QuotaEngine
from gateway.quotas.settings import PlanConfig, QuotaConfig
from gateway.quotas.throttle import Throttle
from tests.redis_server import RedisServer

REQUEST_BYTES = 16_384


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _paced(engine: QuotaEngine, rate: float, seconds: float) -> dict[str, Any]:
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    for _ in range(100):  # until the engine has reached Redis
        if engine.redis_up:
            break
        await asyncio.sleep(0.05)
    throttles = [
        Throttle(engine, ClientIdentity("bench", "127.0.0.1", 40000 + i, "User:bench"))
        for i in range(8)  # eight connections of one principal
    ]
    took: list[float] = []
    syncs0, throttled = engine.counters["syncs_total"], 0
    cpu0, started = _cpu_s(), time.monotonic()
    sent = 0
    while (now := time.monotonic()) - started < seconds:
        due = int((now - started) * rate) - sent
        for _ in range(max(0, due)):
            t0 = time.perf_counter()
            ms = throttles[sent % 8].on_request(apis.PRODUCE, REQUEST_BYTES)
            took.append(time.perf_counter() - t0)
            throttled += ms > 0
            sent += 1
        await asyncio.sleep(0.001)  # the event loop runs the sync meanwhile, as in the gateway
    elapsed = time.monotonic() - started
    cpu = _cpu_s() - cpu0
    syncs = engine.counters["syncs_total"] - syncs0
    stop.set()
    await task
    took.sort()
    return {
        "requests": sent,
        "requests_per_s": round(sent / elapsed),
        "charge_us_p50": round(statistics.median(took) * 1e6, 2),
        "charge_us_p99": round(took[int(len(took) * 0.99)] * 1e6, 2),
        "charge_us_max": round(took[-1] * 1e6, 1),
        "charge_us_mean": round(sum(took) / len(took) * 1e6, 2),
        "process_cpu_us_per_request": round(cpu / max(1, sent) * 1e6, 1),
        "redis_round_trips_per_s": round(syncs / elapsed, 1),
        "redis_round_trips_per_request": round(syncs / max(1, sent), 4),
        "throttled_requests": throttled,
    }


def measure(rate: float, seconds: float) -> dict[str, dict[str, Any]]:
    """Paced charges with unreachable limits, then with a produce limit at half the load."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as directory:
        redis = RedisServer(Path(directory))
        redis.start()
        try:
            load = rate * REQUEST_BYTES
            for name, produce in (("unreachable", 1e12), ("over-quota", load / 2)):
                cfg = QuotaConfig(
                    redis_url=redis.url,
                    key_prefix=f"kgw:charge:{name}:",
                    default_plan="p",
                    plans={"p": PlanConfig(produce_bytes=produce, requests=1e9)},
                )
                engine = QuotaEngine.from_config(cfg)
                results[name] = asyncio.run(_paced(engine, rate, seconds))
        finally:
            redis.stop()
    return results
