"""LoginGate: the login policy around one SASL step, with a real FailureLimiter on a
fake clock and a fake tenant watch."""

from __future__ import annotations

import pytest

from gateway.sasl import FailureLimiter, address_key, principal_key
from gateway.sasl.base import AUTH_FAILED, LOCKED_OUT, Step, fail
from gateway.sasl.gate import Admission, Lockout, LoginGate, Verdict

HOST = "10.0.0.1"
ADDRESS = address_key(HOST)
ALICE = principal_key("ak_alice")
PLAIN_ALICE = b"\0ak_alice\0wrong-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tenants:
    def __init__(self, *blocked: str) -> None:
        self._blocked = frozenset(blocked)
        self.asked: list[str | None] = []

    def blocked(self, tenant: str | None) -> bool:
        self.asked.append(tenant)
        return tenant is not None and tenant in self._blocked


def limiter(**kwargs: float) -> FailureLimiter:
    settings: dict[str, float] = {
        "max_failures": 3,
        "window_s": 60.0,
        "base_delay_s": 1.0,
        "max_delay_s": 8.0,
        "lockout_s": 300.0,
    }
    settings.update(kwargs)
    return FailureLimiter(clock=Clock(), **settings)  # type: ignore[arg-type]


def success(tenant: str | None = "acme", claimed: str | None = "ak_alice") -> Step:
    return Step(challenge=b"", done=True, principal="User:ak_alice", tenant=tenant, claimed=claimed)


def wrong_secret(claimed: str | None = "ak_alice") -> Step:
    return fail("bad_secret", claimed)


def fail_times(gate: LoginGate, n: int, host: str = HOST, auth: bytes = PLAIN_ALICE) -> Verdict:
    verdict = Verdict(wrong_secret())
    for _ in range(n):
        admission = gate.admit(host, "PLAIN", auth)
        verdict = gate.judge(admission, admission.refusal or wrong_secret())
    return verdict


# admit


def test_not_locked_admits_with_address_and_claimed_principal_keys() -> None:
    gate = LoginGate(limiter())
    admission = gate.admit(HOST, "PLAIN", PLAIN_ALICE)
    assert admission == Admission("PLAIN", "ak_alice", (ADDRESS, ALICE), None)
    assert not admission.locked


@pytest.mark.parametrize(
    ("mechanism", "auth"),
    [("GSSAPI", b"\x60\x82token"), ("PLAIN", b"no separators"), ("SCRAM-SHA-256", b"c=biws,r=x")],
)
def test_nothing_claimed_keys_only_the_address(mechanism: str, auth: bytes) -> None:
    admission = LoginGate(limiter()).admit(HOST, mechanism, auth)
    assert admission.claimed is None
    assert admission.keys == (ADDRESS,)


def test_scram_first_message_claims_its_user() -> None:
    admission = LoginGate(limiter()).admit(HOST, "SCRAM-SHA-512", b"n,,n=bob,r=abc")
    assert admission.keys == (ADDRESS, principal_key("bob"))


def test_locked_address_is_refused_without_running_the_mechanism() -> None:
    limits = limiter(lockout_address_failures=2)
    limits.record_failure(ADDRESS)
    limits.record_failure(ADDRESS)
    gate = LoginGate(limits)
    admission = gate.admit(HOST, "PLAIN", PLAIN_ALICE)
    assert admission.locked
    assert admission.refusal == fail("locked_out", "ak_alice", LOCKED_OUT)
    assert admission.refusal.error == LOCKED_OUT and admission.refusal.done
    assert not gate.admit("10.0.0.2", "PLAIN", PLAIN_ALICE).locked  # another address


def test_locked_claimed_principal_is_refused_from_any_address() -> None:
    limits = limiter(lockout_principal_failures=1)
    limits.record_failure(ALICE)
    gate = LoginGate(limits)
    admission = gate.admit("10.9.9.9", "PLAIN", PLAIN_ALICE)
    assert admission.refusal == fail("locked_out", "ak_alice", LOCKED_OUT)
    assert not gate.admit("10.9.9.9", "PLAIN", b"\0ak_bob\0secret").locked  # another name


def test_an_expired_lockout_admits_again() -> None:
    clock = Clock()
    limits = FailureLimiter(lockout_address_failures=1, lockout_s=300.0, clock=clock)
    limits.record_failure(ADDRESS)
    gate = LoginGate(limits)
    assert gate.admit(HOST, "PLAIN", PLAIN_ALICE).locked
    clock.now += 301
    assert not gate.admit(HOST, "PLAIN", PLAIN_ALICE).locked


def test_crashed_mechanism_fails_with_the_claimed_name() -> None:
    admission = LoginGate(limiter()).admit(HOST, "PLAIN", PLAIN_ALICE)
    assert admission.crashed() == fail("internal error in PLAIN", "ak_alice")
    assert admission.crashed().error == AUTH_FAILED


# judge


def test_failure_is_counted_under_address_and_claimed_principal_once() -> None:
    limits = limiter()
    gate = LoginGate(limits)
    verdict = gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), wrong_secret())
    assert verdict == Verdict(wrong_secret(), 0.0, ())
    assert limits.failures(ADDRESS) == 1
    assert limits.failures(ALICE) == 1  # not twice: the step claims the same name


def test_failure_adds_the_principal_the_mechanism_learned() -> None:
    limits = limiter()
    gate = LoginGate(limits)
    admission = gate.admit(HOST, "GSSAPI", b"\x60token")
    assert admission.keys == (ADDRESS,)
    gate.judge(admission, wrong_secret(claimed="alice@REALM"))
    assert limits.failures(ADDRESS) == 1
    assert limits.failures(principal_key("alice@REALM")) == 1


def test_failure_without_any_claim_counts_only_the_address() -> None:
    limits = limiter()
    gate = LoginGate(limits)
    gate.judge(gate.admit(HOST, "GSSAPI", b"\x60token"), wrong_secret(claimed=None))
    assert limits.failures(ADDRESS) == 1
    assert len(limits) == 1


def test_delay_grows_once_failures_pass_the_threshold() -> None:
    gate = LoginGate(limiter())
    delays = [fail_times(gate, 1).delay_s for _ in range(6)]
    assert delays == [0.0, 0.0, 1.0, 2.0, 4.0, 8.0]


def test_newly_locked_keys_are_reported_once_as_host_and_principal() -> None:
    gate = LoginGate(limiter(lockout_address_failures=3, lockout_principal_failures=3))
    assert fail_times(gate, 2).lockouts == ()
    verdict = fail_times(gate, 1)
    assert verdict.lockouts == (
        Lockout("host", HOST, 300.0),
        Lockout("principal", "ak_alice", 300.0),
    )
    assert [lockout.reason for lockout in verdict.lockouts] == ["addr", "principal"]
    assert verdict.delay_s == 1.0
    assert fail_times(gate, 1).lockouts == ()  # now refused, not locked again


def test_a_refusal_is_not_counted_and_waits_at_least_the_base_delay() -> None:
    limits = limiter(lockout_address_failures=1)
    gate = LoginGate(limits)
    fail_times(gate, 1)
    admission = gate.admit(HOST, "PLAIN", PLAIN_ALICE)
    assert admission.refusal is not None
    verdict = gate.judge(admission, admission.refusal)
    assert verdict == Verdict(admission.refusal, 1.0, ())
    assert limits.failures(ADDRESS) == 1  # only the failure before the lockout


def test_a_success_leaves_the_limiter_untouched() -> None:
    limits = limiter()
    gate = LoginGate(limits, Tenants())
    step = success()
    verdict = gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), step)
    assert verdict == Verdict(step)
    assert verdict.step is step
    assert len(limits) == 0


def test_a_non_final_step_leaves_the_limiter_untouched() -> None:
    limits = limiter(max_failures=1)
    gate = LoginGate(limits)
    step = Step(challenge=b"r=server-nonce", done=False, claimed="bob")
    verdict = gate.judge(gate.admit(HOST, "SCRAM-SHA-256", b"n,,n=bob,r=abc"), step)
    assert verdict == Verdict(step)
    assert len(limits) == 0


def test_success_for_a_blocked_tenant_fails_and_counts() -> None:
    limits = limiter()
    tenants = Tenants("acme")
    gate = LoginGate(limits, tenants)
    verdict = gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), success("acme"))
    assert verdict.step == fail("tenant_blocked", "ak_alice")
    assert not verdict.step.succeeded and verdict.step.error == AUTH_FAILED
    assert tenants.asked == ["acme"]
    assert limits.failures(ADDRESS) == 1 and limits.failures(ALICE) == 1


def test_blocked_tenant_failure_names_the_principal_when_nothing_was_claimed() -> None:
    gate = LoginGate(None, Tenants("acme"))
    verdict = gate.judge(gate.admit(HOST, "GSSAPI", b"\x60"), success("acme", claimed=None))
    assert verdict == Verdict(fail("tenant_blocked", "User:ak_alice"))


def test_success_for_another_tenant_passes() -> None:
    gate = LoginGate(limiter(), Tenants("acme"))
    step = success("globex")
    assert gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), step).step is step


def test_failures_are_not_checked_against_tenants() -> None:
    tenants = Tenants("acme")
    gate = LoginGate(limiter(), tenants)
    gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), wrong_secret())
    assert tenants.asked == []


def test_without_a_limiter_nothing_is_refused_delayed_or_locked() -> None:
    gate = LoginGate(None, Tenants("acme"))
    admission = gate.admit(HOST, "PLAIN", PLAIN_ALICE)
    assert admission == Admission("PLAIN", "ak_alice", (ADDRESS, ALICE), None)
    for _ in range(10):
        assert gate.judge(admission, wrong_secret()) == Verdict(wrong_secret())
    assert gate.judge(admission, success("acme")).step == fail("tenant_blocked", "ak_alice")


def test_without_tenants_a_success_passes() -> None:
    limits = limiter()
    gate = LoginGate(limits, None)
    step = success("acme")
    assert gate.judge(gate.admit(HOST, "PLAIN", PLAIN_ALICE), step) == Verdict(step)
    assert len(limits) == 0


def test_a_lockout_unpacks_as_kind_name_seconds() -> None:
    gate = LoginGate(limiter(lockout_address_failures=1))
    [(kind, name, seconds)] = fail_times(gate, 1).lockouts
    assert (kind, name, seconds) == ("host", HOST, 300.0)
