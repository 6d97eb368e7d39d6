"""FailureLimiter lockout: per address and per claimed principal, with a fake clock."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.sasl import FailureLimiter, address_key, principal_key
from gateway.sasl.settings import FailureLimiterConfig


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ADDRESS = address_key("10.0.0.1")
VICTIM = principal_key("ak_victim")


def limiter(clock: Clock, **kwargs: float) -> FailureLimiter:
    settings: dict[str, float] = {"max_failures": 3, "window_s": 60.0, "lockout_s": 300.0}
    settings.update(kwargs)
    return FailureLimiter(clock=clock, **settings)  # type: ignore[arg-type]


def test_the_nth_failure_locks_the_address_out_for_lockout_s() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_address_failures=4)
    for _ in range(3):
        assert limits.record_failure(ADDRESS, VICTIM) == []
        assert not limits.locked_out(ADDRESS)
    assert limits.record_failure(ADDRESS, VICTIM) == [ADDRESS]  # principal lockout is off
    assert limits.locked_out(ADDRESS) and limits.locked_out(address_key("x"), ADDRESS)
    assert not limits.locked_out(VICTIM) and not limits.locked_out(address_key("10.0.0.2"))
    clock.now += 299
    assert limits.locked_out(ADDRESS)
    clock.now += 2
    assert not limits.locked_out(ADDRESS)


def test_failures_spread_wider_than_the_window_never_lock() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_address_failures=3)
    for _ in range(10):
        assert limits.record_failure(ADDRESS) == []
        clock.now += 31  # at most two failures within any 60 s
    assert not limits.locked_out(ADDRESS)


def test_principal_lockout_when_enabled() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_principal_failures=2)
    limits.record_failure(address_key("a"), VICTIM)
    assert limits.record_failure(address_key("b"), VICTIM) == [VICTIM]  # from two addresses
    assert limits.locked_out(VICTIM)
    assert not limits.locked_out(address_key("a"), principal_key("ak_other"))


def test_refusals_during_a_lockout_neither_count_nor_extend_it() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_address_failures=2, base_delay_s=0.5, max_delay_s=4.0)
    limits.failed(ADDRESS)
    delay, locked = limits.failed(ADDRESS)
    assert locked == [ADDRESS] and delay == 0.0  # below max_failures: no delay yet
    clock.now += 200
    assert limits.failed(ADDRESS, refused=True) == (0.5, [])  # waits at least base_delay_s
    assert limits.failures(ADDRESS) == 0  # aged out; the refusal was not counted
    clock.now += 101
    assert not limits.locked_out(ADDRESS)  # 300 s after it began, refusals or not


def test_lockout_off_by_default_and_a_reset_lifts_it() -> None:
    clock = Clock()
    limits = limiter(clock)
    for _ in range(200):
        assert limits.record_failure(ADDRESS, VICTIM) == []
    assert not limits.locked_out(ADDRESS, VICTIM)
    locking = limiter(clock, lockout_address_failures=1)
    locking.record_failure(ADDRESS)
    locking.reset(ADDRESS)
    assert not locking.locked_out(ADDRESS)


def test_high_thresholds_are_reachable() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_address_failures=500)
    locked = [limits.record_failure(ADDRESS) for _ in range(500)]
    assert locked[-1] == [ADDRESS] and not any(locked[:-1])


def test_locked_keys_are_bounded_by_max_keys() -> None:
    clock = Clock()
    limits = limiter(clock, lockout_address_failures=1, max_keys=10)
    for n in range(100):
        limits.record_failure(address_key(f"10.0.{n}.1"))
    assert len(limits) == 10
    assert limits.locked_out(address_key("10.0.99.1"))
    assert not limits.locked_out(address_key("10.0.0.1"))  # forgotten first


def test_config_defaults_and_bounds() -> None:
    config = FailureLimiterConfig()
    assert config.lockout_address_failures == 0  # off: see docs/sasl.md
    assert config.lockout_principal_failures == 0 and config.lockout_s == 300.0
    with pytest.raises(ValidationError):
        FailureLimiterConfig(lockout_address_failures=-1)
    with pytest.raises(ValidationError):
        FailureLimiterConfig(lockout_s=0)
    with pytest.raises(ValueError, match="lockout"):
        FailureLimiter(lockout_principal_failures=-1)
