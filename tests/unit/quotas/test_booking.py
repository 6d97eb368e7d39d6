"""A connection's ``Booking`` (decision 0047) never outlives what it points to: new
settings, a Redis outage (open or closed), its return, and a dropped local bucket all
reach the very next request of a connection that charged before."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.quotas import QuotaConfig, QuotaEngine, QuotaKind, Target
from gateway.quotas.booking import Booking
from gateway.quotas.store import FileQuotaStore

from .conftest import ALICE, Clock, EngineFactory, settings

P = QuotaKind.PRODUCE_BYTES


def test_new_settings_reach_a_booked_connection_at_once(
    make_engine: EngineFactory, clock: Clock
) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 10**9}})
    booking = Booking()
    assert engine.charge_request(ALICE, 10**6, booking) == 0
    engine.apply_settings(
        settings({"tenant:acme": {"produce_bytes": 100, "produce_bytes_burst": 100}})
    )
    assert engine.charge_request(ALICE, 300, booking) == pytest.approx(2000.0)
    engine.apply_settings(settings({}))  # no quota any more
    assert engine.charge_request(ALICE, 10**9, booking) == 0


def test_a_quota_added_later_reaches_a_connection_that_had_none(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    booking = Booking()
    assert engine.charge_request(ALICE, None, booking) == 0
    engine.apply_settings(settings({"tenant:acme": {"requests": 1, "requests_burst": 1}}))
    engine.charge_request(ALICE, None, booking)
    assert engine.charge_request(ALICE, None, booking) > 0


def _shared(clock: Clock, **config: Any) -> QuotaEngine:
    cfg = QuotaConfig.model_validate({"redis_url": "redis://127.0.0.1:1/0", **config})
    engine = QuotaEngine.from_config(cfg, store=FileQuotaStore("/nonexistent/q.json"), clock=clock)
    engine.apply_settings(
        engine.settings.__class__({Target.parse("tenant:acme"): {"produce_bytes": 300}})
    )
    return engine


def test_redis_going_down_and_up_reaches_a_booked_connection(clock: Clock) -> None:
    engine = _shared(clock, on_redis_failure="closed", max_throttle_ms=1500)
    engine.set_redis_state("up")
    booking = Booking()
    engine.charge_request(ALICE, 1, booking)
    leased = booking.produced
    engine.set_redis_state("down", "ConnectionError")
    assert engine.charge_request(ALICE, 1, booking) == 1500  # failing closed
    assert engine.metrics()["throttled_total.produce_bytes"] == 1
    engine.set_redis_state("up")
    assert engine.charge_request(ALICE, 1, booking) == 0
    assert booking.produced is not leased  # a fresh lease, not the one dropped at "down"


def test_failing_open_a_booked_connection_gets_the_local_share(clock: Clock) -> None:
    engine = _shared(clock, on_redis_failure="open", expected_instances=3)
    engine.set_redis_state("up")
    booking = Booking()
    engine.charge_request(ALICE, 1, booking)
    engine.set_redis_state("down", "ConnectionError")
    # local bucket: 100/s, burst 100 (a third of the shared 300/300)
    assert engine.charge_request(ALICE, 100, booking) == 0
    assert engine.charge_request(ALICE, 100, booking) == pytest.approx(1000.0)


def test_a_pruned_bucket_is_not_charged_through_an_old_booking(
    make_engine: EngineFactory, clock: Clock
) -> None:
    engine = make_engine({"tenant:acme": {"produce_bytes": 100, "produce_bytes_burst": 100}})
    booking = Booking()
    engine.charge_request(ALICE, 50, booking)
    clock.now += 10  # refilled: the engine forgets the bucket
    engine.prune(clock.now)
    assert engine.metrics()["buckets_local"] == 0
    assert engine.charge_request(ALICE, 100, booking) == 0
    assert engine.metrics()["buckets_local"] == 1  # the new bucket is the one charged
    assert engine.charge_request(ALICE, 50, booking) == pytest.approx(500.0)


def test_another_subject_on_the_same_booking_is_looked_up_afresh(
    make_engine: EngineFactory,
) -> None:
    from gateway.quotas import Subject

    engine = make_engine({"principal:User:bob": {"requests": 1, "requests_burst": 1}})
    booking = Booking()
    assert engine.charge_request(ALICE, None, booking) == 0
    assert engine.charge_request(ALICE, None, booking) == 0  # alice has no quota
    bob = Subject("User:bob", None, None, "10.0.0.1")
    engine.charge_request(bob, None, booking)
    assert engine.charge_request(bob, None, booking) > 0
