"""Lag per partition and group, consume rate and time to catch up (no I/O)."""

from __future__ import annotations

import math

import pytest

from gateway.monitoring.lag import (
    GroupLag,
    RateTracker,
    partition_lag,
    tenant_totals,
    time_to_catch_up,
)


def test_partition_lag_is_end_minus_committed() -> None:
    committed = {("t", 0): 10, ("t", 1): -1, ("t", 2): 50, ("u", 0): 3}
    ends = {("t", 0): 25, ("t", 1): 40, ("t", 2): 50}
    assert partition_lag(committed, ends) == {("t", 0): 15, ("t", 2): 0}


def test_committed_beyond_end_is_no_negative_lag() -> None:
    assert partition_lag({("t", 0): 30}, {("t", 0): 20}) == {("t", 0): 0}


def test_time_to_catch_up() -> None:
    assert time_to_catch_up(0, 0.0) == 0.0
    assert time_to_catch_up(100, 10.0) == 10.0
    assert math.isinf(time_to_catch_up(1, 0.0))


def test_rate_over_window_and_reset() -> None:
    rates = RateTracker(window_s=10)
    assert rates.observe("g", 0.0, 0) == 0.0
    assert rates.observe("g", 5.0, 50) == pytest.approx(10.0)
    assert rates.observe("g", 10.0, 100) == pytest.approx(10.0)
    assert rates.observe("g", 20.0, 100) == pytest.approx(0.0)  # window slid: stopped
    assert rates.observe("g", 21.0, 10) == 0.0  # offsets went back: start over
    rates.forget_except(set())
    assert rates.observe("g", 30.0, 10) == 0.0


def test_group_totals_and_tenants() -> None:
    a = GroupLag(
        "acme.g", "acme", "classic", {("acme.t", 0): 5, ("acme.t", 1): 7}, consume_rate=2.0
    )
    b = GroupLag("acme.h", "acme", "consumer", {("acme.t", 0): 1})
    c = GroupLag("beta.g", "beta", "classic", {})
    assert (a.total, a.max_partition, a.catch_up_s) == (12, 7, 6.0)
    assert math.isinf(b.catch_up_s) and c.catch_up_s == 0.0
    assert tenant_totals([a, b, c]) == {"acme": 13, "beta": 0}
