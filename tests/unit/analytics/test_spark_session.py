"""The local Spark session: what its driver listens on, and its scheduler pools."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gateway.analytics.spark import FIRST, LATER, in_pool
from tests.loopback import bound_addresses


def test_the_local_driver_listens_on_loopback_only(spark: Any) -> None:
    from pyspark import SparkContext

    assert spark.range(100).count() == 100  # the block manager and RPC server are up
    gateway = SparkContext._gateway
    assert gateway is not None
    addresses = bound_addresses(pid=gateway.proc.pid)
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
