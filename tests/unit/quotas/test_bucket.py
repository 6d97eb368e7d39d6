"""Token-bucket arithmetic with an injected clock: burst, steady rate, throttle times,
and several instances sharing one bucket through leases (the Redis script's model)."""

from __future__ import annotations

import pytest

from gateway.quotas.bucket import (
    GlobalBucket,
    LeasedBucket,
    TokenBucket,
    floor_for,
    throttle_ms,
)

RATE = 1000.0  # units per second
BURST = 500.0
CAP_MS = 10_000.0
FLOOR = floor_for(RATE, CAP_MS)


def test_throttle_is_the_time_to_pay_the_deficit_back_capped() -> None:
    assert throttle_ms(0, RATE, CAP_MS) == 0
    assert throttle_ms(-5, RATE, CAP_MS) == 0
    assert throttle_ms(250, RATE, CAP_MS) == pytest.approx(250.0)
    assert throttle_ms(1_000_000, RATE, CAP_MS) == CAP_MS


def test_the_burst_passes_unthrottled_then_the_deficit_throttles() -> None:
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    for _ in range(5):
        assert bucket.charge(100, 0.0) == 0  # 500 = the burst
    deficit = bucket.charge(100, 0.0)
    assert deficit == pytest.approx(100)
    assert throttle_ms(deficit, RATE, CAP_MS) == pytest.approx(100.0)  # 100 units at 1000/s


def test_after_the_throttle_the_bucket_is_even_again() -> None:
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    bucket.charge(BURST + 300, 0.0)
    assert bucket.deficit(0.0) == pytest.approx(300)
    assert bucket.deficit(0.299) == pytest.approx(1, abs=1e-6)
    assert bucket.deficit(0.3) == 0


def test_steady_rate_is_the_configured_rate() -> None:
    """A client that honours every throttle gets burst + rate * t over t seconds."""
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    now, admitted = 0.0, 0.0
    while now < 10.0:
        admitted += 64
        wait = throttle_ms(bucket.charge(64, now), RATE, CAP_MS) / 1000
        now += max(wait, 0.001)  # the client would send every ms
    assert admitted == pytest.approx(BURST + RATE * 10, rel=0.01)


def test_refill_never_exceeds_the_burst() -> None:
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    bucket.charge(100, 0.0)
    bucket.deficit(3600.0)
    assert bucket.tokens == BURST


def test_the_deficit_stops_at_what_the_cap_can_express() -> None:
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    assert throttle_ms(bucket.charge(10**9, 0.0), RATE, CAP_MS) == CAP_MS
    # after the capped wait the subject is even again: one huge request is not a life sentence
    assert bucket.deficit(CAP_MS / 1000) == 0


def test_try_take_refuses_instead_of_going_negative() -> None:
    bucket = TokenBucket(2.0, 2.0, now=0.0, floor=0.0)
    assert bucket.try_take(1, 0.0) and bucket.try_take(1, 0.0)
    assert not bucket.try_take(1, 0.0)
    assert bucket.try_take(1, 0.5)


def test_lowering_the_burst_clamps_the_tokens() -> None:
    bucket = TokenBucket(RATE, BURST, now=0.0, floor=FLOOR)
    bucket.reconfigure(10.0, 20.0, floor_for(10.0, CAP_MS))
    assert bucket.tokens == 20.0


def test_the_global_model_refills_books_the_debit_and_grants_a_lease() -> None:
    shared = GlobalBucket(now=0.0)
    assert shared.take(RATE, BURST, FLOOR, debit=0, want=100, now=0.0) == (100, 400)
    assert shared.take(RATE, BURST, FLOOR, debit=450, want=100, now=0.0) == (0, -50)
    grant, tokens = shared.take(RATE, BURST, FLOOR, debit=0, want=100, now=0.1)
    assert grant == pytest.approx(50) and tokens == pytest.approx(0)
    # a returned lease (negative debit) never lifts the bucket above its burst
    assert shared.take(RATE, BURST, FLOOR, debit=-10_000, want=0, now=0.1)[1] == BURST


def test_a_leased_bucket_spends_its_lease_without_asking() -> None:
    view = LeasedBucket(RATE, BURST, FLOOR, chunk=100, now=0.0)
    debit, want = view.sync_request()
    assert (debit, want) == (0, 100)
    view.synced(debit, 100, tokens=400, now=0.0)
    assert view.charge(60, 0.0) == 0 and view.needs_sync()  # below half a chunk
    assert view.charge(40, 0.0) == 0
    assert view.charge(50, 0.0) == 0  # debt, but the shared bucket had 400
    assert view.sync_request() == (50, 100)


def test_a_leased_bucket_throttles_for_the_shared_deficit() -> None:
    view = LeasedBucket(RATE, BURST, FLOOR, chunk=100, now=0.0)
    view.synced(0, 0, tokens=-200, now=0.0)  # other instances left the bucket 200 short
    deficit = view.charge(100, 0.0)
    assert throttle_ms(deficit, RATE, CAP_MS) == pytest.approx(300.0)
    assert throttle_ms(view.deficit(0.1), RATE, CAP_MS) == pytest.approx(200.0)  # refill counts


def test_with_no_lease_left_the_shared_deficit_still_throttles() -> None:
    view = LeasedBucket(RATE, BURST, FLOOR, chunk=100, now=0.0)
    view.charge(300, 0.0)  # a debt of 300 beyond an empty lease
    debit, _ = view.sync_request()
    view.synced(debit, 0, tokens=-250, now=0.0)  # reported; the shared bucket is in debt
    assert view.lease == 0
    # nothing prepaid is in hand: a Fetch or a KIP-599 check asking now is throttled
    assert throttle_ms(view.deficit(0.0), RATE, CAP_MS) == pytest.approx(250.0)
    assert view.deficit(0.25) == 0.0  # paid back by the refill


def test_charges_made_while_a_sync_is_in_flight_stay_counted() -> None:
    view = LeasedBucket(RATE, BURST, FLOOR, chunk=100, now=0.0)
    debit, _ = view.sync_request()
    view.charge(30, 0.0)  # while the round trip is out
    view.synced(debit, 100, tokens=400, now=0.01)
    assert view.lease == 70


def test_handing_a_lease_back() -> None:
    view = LeasedBucket(RATE, BURST, FLOOR, chunk=100, now=0.0)
    view.synced(0, 100, tokens=400, now=0.0)
    view.charge(30, 0.0)
    assert view.sync_request(release=True) == (-70, 0)


def _simulate(instances: int, seconds: float, offered_factor: float) -> tuple[float, int]:
    """``instances`` gateways, each with one client offering its share of
    ``offered_factor`` x the rate in 100-unit requests and honouring throttles; each
    gateway syncs every 50 ms (staggered) with one shared bucket."""
    shared = GlobalBucket(now=0.0)
    chunk = RATE * 0.1
    views = [LeasedBucket(RATE, BURST, FLOOR, chunk, 0.0) for _ in range(instances)]
    interval = 100 / (RATE * offered_factor / instances)
    next_send = [i * interval / instances for i in range(instances)]
    next_sync = [0.05 * i / instances for i in range(instances)]
    admitted, throttled, now = 0.0, 0, 0.0
    while now < seconds:
        for i, view in enumerate(views):
            if now >= next_sync[i]:
                debit, want = view.sync_request()
                grant, tokens = shared.take(RATE, BURST, FLOOR, debit, want, now)
                view.synced(debit, grant, tokens, now)
                next_sync[i] += 0.05
            if now >= next_send[i]:
                admitted += 100
                wait = throttle_ms(view.charge(100, now), RATE, CAP_MS) / 1000
                throttled += wait > 0
                next_send[i] = now + max(interval, wait)
        now += 0.0005
    return admitted, throttled


@pytest.mark.parametrize("instances", [1, 3, 5])
def test_instances_sharing_one_bucket_enforce_one_budget(instances: int) -> None:
    admitted, throttled = _simulate(instances, seconds=20.0, offered_factor=2.0)
    expected = BURST + RATE * 20.0
    assert throttled > 0
    assert admitted == pytest.approx(expected, rel=0.05), admitted / expected


def test_below_the_quota_nobody_is_throttled() -> None:
    admitted, throttled = _simulate(3, seconds=10.0, offered_factor=0.8)
    assert throttled == 0
    assert admitted == pytest.approx(RATE * 0.8 * 10.0, rel=0.02)


def _simultaneous_burst(share: int) -> float:
    """Three instances, each just synced, spend what they believe is there at once."""
    shared = GlobalBucket(now=0.0)
    views = [LeasedBucket(RATE, BURST, FLOOR, 100, 0.0, share=share) for _ in range(3)]
    for view in views:
        debit, want = view.sync_request()
        view.synced(debit, *shared.take(RATE, BURST, FLOOR, debit, want, 0.0), now=0.0)
    admitted = 0.0
    for view in views:
        while True:
            admitted += 10
            if view.charge(10, 0.0) > 0:
                break
    return admitted


def test_instances_that_all_see_a_full_bucket_spend_it_about_once() -> None:
    assert _simultaneous_burst(share=3) <= 1.25 * BURST
    assert _simultaneous_burst(share=1) >= 2 * BURST  # what share (expected_instances) prevents
