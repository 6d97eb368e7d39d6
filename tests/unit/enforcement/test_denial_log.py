"""Authorization denials in the gateway's own log: rate-limited per connection, and
bounded when a client keeps naming new resources."""

from __future__ import annotations

import logging

import pytest

from gateway.enforcement.denials import DENIAL_LOG_INTERVAL_S, MAX_DISTINCT, DenialLog
from gateway.identity import ClientIdentity

IDENTITY = ClientIdentity(listener="public", host="127.0.0.1", port=5000, principal="User:mallory")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == name]


def test_the_same_denial_is_logged_once_an_interval_with_the_count_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    denials = DenialLog(clock)
    with caplog.at_level(logging.INFO, logger="kgw.authz"):
        for _ in range(5):
            denials.log(["TOPIC:secret WRITE: no rule allows it"], IDENTITY, 0, 9)
        clock.now += DENIAL_LOG_INTERVAL_S
        denials.log(["TOPIC:secret WRITE: no rule allows it"], IDENTITY, 0, 9)
    lines = events(caplog, "authorization_denied")
    assert len(lines) == 2
    assert "[4 identical denials not logged]" in lines[1].getMessage()


def test_a_scan_of_new_names_is_counted_not_logged_one_by_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    denials = DenialLog(clock)
    with caplog.at_level(logging.INFO, logger="kgw.authz"):
        for n in range(10_000):
            denials.log([f"TOPIC:guess-{n} READ: no rule allows it"], IDENTITY, 1, 12)
            clock.now += 0.0001  # 10,000 requests in one second
    assert len(events(caplog, "authorization_denied")) == MAX_DISTINCT
    (report,) = events(caplog, "authorization_denied_unlogged")
    assert report.count == 1  # the first one past the bound; later ones await the interval
    assert len(denials._logged) == MAX_DISTINCT
    with caplog.at_level(logging.INFO, logger="kgw.authz"):
        clock.now += DENIAL_LOG_INTERVAL_S  # the interval is over: room again
        denials.log(["TOPIC:guess-x READ: no rule allows it"], IDENTITY, 1, 12)
    assert len(events(caplog, "authorization_denied")) == MAX_DISTINCT + 1
    assert len(denials._logged) == 1


def test_the_unlogged_are_reported_once_an_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    denials = DenialLog(clock)
    with caplog.at_level(logging.INFO, logger="kgw.authz"):
        for n in range(MAX_DISTINCT + 100):
            denials.log([f"TOPIC:a-{n} READ: denied"], IDENTITY, 1, 12)
        clock.now += DENIAL_LOG_INTERVAL_S / 2
        for n in range(50):
            denials.log([f"TOPIC:b-{n} READ: denied"], IDENTITY, 1, 12)
        clock.now += DENIAL_LOG_INTERVAL_S / 2 + 0.1
        for n in range(50):  # the first batch's interval is over: logged again, one by one
            denials.log([f"TOPIC:c-{n} READ: denied"], IDENTITY, 1, 12)
    reports = events(caplog, "authorization_denied_unlogged")
    assert [r.count for r in reports] == [1, 99 + 50]  # the first at once, the rest after
    assert len(events(caplog, "authorization_denied")) == MAX_DISTINCT + 50
