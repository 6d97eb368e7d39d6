"""A connection's throttle (``quotas.throttle.Throttle``): the mute runs from the charge,
so the response (a broker round trip later) mutes only for what is left of it."""

from __future__ import annotations

import pytest

from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.quotas.model import QuotaKind
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


@pytest.mark.parametrize("api_key", [apis.PRODUCE, apis.FETCH, apis.METADATA])
def test_one_charge_per_request_books_what_two_charges_booked(
    make_engine: EngineFactory, clock: Clock, api_key: int
) -> None:
    """``charge_request`` (one clock reading, issue 16) throttles and counts exactly as a
    charge of one request then, for a Produce, one of its bytes, at the same instant."""
    quotas = {
        "principal:User:alice": {
            "produce_bytes": 1000, "produce_bytes_burst": 1000,
            "requests": 5, "requests_burst": 3,
        }
    }  # fmt: skip
    combined, separate = make_engine(quotas=quotas), make_engine(quotas=quotas)
    subject = Throttle(combined, ClientIdentity("local", "10.0.0.1", 5000, "User:alice")).subject()
    for size in (400, 400, 900, 50, 3000, 10):
        produced = size if api_key == apis.PRODUCE else None
        got = combined.charge_request(subject, produced)
        wanted = separate.charge(subject, QuotaKind.REQUESTS, 1)
        if produced is not None:
            wanted = max(wanted, separate.charge(subject, QuotaKind.PRODUCE_BYTES, produced))
        assert got == pytest.approx(wanted)
        clock.now += 0.05
    assert combined.counters == separate.counters
    assert combined.counters["throttled_total.requests"] > 0


def test_a_new_principal_after_authentication_is_charged_as_itself(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine(quotas={"principal:User:bob": {"requests": 1, "requests_burst": 1}})
    identity = ClientIdentity("local", "10.0.0.1", 5000)
    throttle = Throttle(engine, identity)
    assert throttle.subject().principal == "User:ANONYMOUS"
    identity.principal, identity.tenant = "User:bob", "t1"
    assert (throttle.subject().principal, throttle.subject().tenant) == ("User:bob", "t1")
    throttle.on_request(apis.METADATA, 10)
    assert throttle.on_request(apis.METADATA, 10) > 0
