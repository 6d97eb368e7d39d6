"""A connection's throttle (``quotas.throttle.Throttle``): the mute runs from the charge,
so the response (a broker round trip later) mutes only for what is left of it."""

from __future__ import annotations

import pytest

from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.quotas.throttle import Throttle

from .conftest import Clock, EngineFactory


def _throttle(make_engine: EngineFactory) -> Throttle:
    engine = make_engine(
        quotas={"principal:User:alice": {"produce_bytes": 1000, "produce_bytes_burst": 1000}}
    )
    return Throttle(engine, ClientIdentity("local", "10.0.0.1", 5000, "User:alice"))


def test_what_is_left_of_a_throttle_counts_from_the_charge(
    make_engine: EngineFactory, clock: Clock
) -> None:
    throttle = _throttle(make_engine)
    assert throttle.on_request(apis.PRODUCE, 1000) == 0  # the burst
    assert throttle.left_ms() == 0
    ms = throttle.on_request(apis.PRODUCE, 500)
    assert ms == pytest.approx(500.0)
    clock.now += 0.2  # the broker's answer comes 200 ms later
    assert throttle.left_ms() == pytest.approx(300.0)
    clock.now += 0.4
    assert throttle.left_ms() == 0


def test_the_longest_throttle_given_is_what_is_left(
    make_engine: EngineFactory, clock: Clock
) -> None:
    throttle = _throttle(make_engine)
    throttle.on_request(apis.PRODUCE, 1000)
    first = throttle.on_request(apis.PRODUCE, 500)
    second = throttle.on_request(apis.PRODUCE, 500)
    assert second > first
    clock.now += 0.1
    assert throttle.left_ms() == pytest.approx(second - 100.0)
