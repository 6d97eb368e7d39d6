"""The local Spark session: what its driver listens on, and its scheduler pools."""

from __future__ import annotations

import ipaddress
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gateway.analytics.spark import FIRST, LATER, in_pool

LISTEN = "0A"  # the TCP state in /proc/net/tcp


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp* print each 32-bit word of the address in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return ipaddress.IPv4Address(words)
    v6 = ipaddress.IPv6Address(words)
    return v6.ipv4_mapped or v6


def listening_addresses(pid: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the process ``pid`` has listening TCP sockets on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in inodes:
                found.append(_address(local.split(":")[0]))
    return found


def test_the_local_driver_listens_on_loopback_only(spark: Any) -> None:
    from pyspark import SparkContext

    assert spark.range(100).count() == 100  # the block manager and RPC server are up
    gateway = SparkContext._gateway
    assert gateway is not None
    addresses = listening_addresses(gateway.proc.pid)
    assert len(addresses) >= 2  # at least Spark's RPC server and block manager
    assert all(address.is_loopback for address in addresses), addresses


def test_jobs_run_in_the_scheduler_pool_they_are_given(spark: Any) -> None:
    scheduler = spark.sparkContext._jsc.sc()
    first, later = (scheduler.getPoolForName(name).get() for name in (FIRST, LATER))
    assert (first.minShare(), first.weight()) == (1_000_000, 1000)
    assert (later.minShare(), later.weight()) == (0, 1)

    def count_and_pool() -> tuple[int, str]:
        return spark.range(10).count(), spark.sparkContext.getLocalProperty("spark.scheduler.pool")

    with ThreadPoolExecutor(max_workers=2) as threads:
        runs = [threads.submit(in_pool(spark, name, count_and_pool)) for name in (FIRST, LATER)]
        assert [run.result() for run in runs] == [(10, FIRST), (10, LATER)]
