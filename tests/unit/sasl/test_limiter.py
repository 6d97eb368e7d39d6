"""FailureLimiter: pure logic with a fake clock."""

from __future__ import annotations

import pytest

from gateway.sasl import FailureLimiter, address_key, principal_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(clock: Clock, **kwargs: float) -> FailureLimiter:
    settings = {"max_failures": 3, "window_s": 60.0, "base_delay_s": 1.0, "max_delay_s": 8.0}
    settings.update(kwargs)
    return FailureLimiter(clock=clock, **settings)  # type: ignore[arg-type]


def test_no_delay_below_the_threshold_then_doubling_to_the_cap() -> None:
    clock = Clock()
    limits = limiter(clock)
    key = address_key("10.0.0.1")
    delays = []
    for _ in range(8):
        delays.append(limits.delay_for(key))
        limits.record_failure(key)
    assert delays == [0.0, 0.0, 0.0, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert limits.delay_for(address_key("10.0.0.2")) == 0.0


def test_failures_age_out_of_the_window() -> None:
    clock = Clock()
    limits = limiter(clock)
    key = principal_key("User:alice")
    for _ in range(4):
        limits.record_failure(key)
        clock.now += 10
    assert limits.delay_for(key) == 2.0
    clock.now += 25  # the first failure is now 65 s old
    assert limits.delay_for(key) == 1.0
    clock.now += 100
    assert limits.delay_for(key) == 0.0
    assert len(limits) == 0  # forgotten entirely


def test_one_attempt_counts_for_address_and_principal() -> None:
    clock = Clock()
    limits = limiter(clock)
    for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"):
        limits.record_failure(address_key(host), principal_key("User:alice"))
    # spread over addresses, the principal is still slowed down
    assert limits.delay(address_key("10.0.0.9"), principal_key("User:alice")) == 2.0
    assert limits.delay(address_key("10.0.0.1"), principal_key("User:bob")) == 0.0


def test_success_does_not_reset_and_reset_is_explicit() -> None:
    clock = Clock()
    limits = limiter(clock)
    for _ in range(5):
        limits.record_failure("k")
    assert limits.delay_for("k") == 4.0
    limits.reset("k")
    assert limits.delay_for("k") == 0.0


def test_memory_is_bounded() -> None:
    clock = Clock()
    limits = limiter(clock, max_keys=100)
    for i in range(1000):
        limits.record_failure(address_key(f"10.0.{i // 256}.{i % 256}"))
    assert len(limits) == 100
    for _ in range(10_000):
        limits.record_failure("hot")
    assert limits.failures("hot") <= 3 + 64
    assert limits.delay_for("hot") == 8.0


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        FailureLimiter(max_failures=0)
    with pytest.raises(ValueError):
        FailureLimiter(base_delay_s=5, max_delay_s=1)
