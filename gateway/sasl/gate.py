"""Login policy around one SASL step, with no I/O: lockout, failure delay, blocked tenants.

The I/O layer awaits the mechanism; this module decides everything around it::

    admission = gate.admit(host, mechanism, auth_bytes)
    step = admission.refusal or await mechanism.step(auth_bytes)  # crash: admission.crashed()
    verdict = gate.judge(admission, step)  # only if the answer will be sent: it counts
    # log verdict.step and each of verdict.lockouts, sleep verdict.delay_s, answer verdict.step

``admit`` reads the name the client claims (``claims.claimed_name``) and refuses an
attempt under a locked-out address or principal without checking its secret.
``judge`` turns a success for a blocked (suspended or deleted) tenant into a failure,
then records a finished failure in the ``FailureLimiter`` under the admission's keys
plus the principal the mechanism learned (``Step.claimed``). A lockout refusal is not
counted (``refused=True``). It returns the delay before the answer and the keys this
failure locked out, as data for the caller to log. A success or an unfinished step
leaves the limiter untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from .base import LOCKED_OUT, Step, fail
from .claims import claimed_name
from .limiter import FailureLimiter, address_key, principal_key


class BlockedTenants(Protocol):
    """What the gate needs of ``tenants.TenantWatch``."""

    def blocked(self, tenant: str | None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Admission:
    """What ``LoginGate.admit`` found before the mechanism runs."""

    mechanism: str
    claimed: str | None  # the name the first message claims (clipped), if any
    keys: tuple[str, ...]  # the limiter keys: the address, then the claimed principal
    refusal: Step | None = None  # answer this instead of running the mechanism

    @property
    def locked(self) -> bool:
        return self.refusal is not None

    def crashed(self) -> Step:
        """The step to answer when the mechanism raised (a bug, never the client's)."""
        return fail(f"internal error in {self.mechanism}", self.claimed)


class Lockout(NamedTuple):
    """A key that a failure has just locked out, for the ``sasl_lockout`` log line
    (a tuple: ``kind, name, seconds = lockout``)."""

    kind: Literal["host", "principal"]
    name: str  # the host, or the claimed principal (clipped)
    seconds: float

    @property
    def reason(self) -> Literal["addr", "principal"]:
        """The ``reason`` the ``sasl_lockout`` line has always carried."""
        return "addr" if self.kind == "host" else "principal"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to answer, after how long, and which lockouts to report."""

    step: Step
    delay_s: float = 0.0
    lockouts: tuple[Lockout, ...] = ()


class LoginGate:
    """The login policy of one gateway: its failure limiter and its tenants' states."""

    def __init__(
        self, limiter: FailureLimiter | None = None, tenants: BlockedTenants | None = None
    ) -> None:
        self.limiter = limiter
        self.tenants = tenants

    def admit(self, host: str, mechanism: str, auth_bytes: bytes) -> Admission:
        """The limiter keys and claimed name of an attempt; a refusal if locked out."""
        claimed = claimed_name(mechanism, auth_bytes)
        keys = [address_key(host)]
        if claimed:
            keys.append(principal_key(claimed))
        refusal = None
        if self.limiter is not None and self.limiter.locked_out(*keys):
            refusal = fail("locked_out", claimed, LOCKED_OUT)
        return Admission(mechanism, claimed, tuple(keys), refusal)

    def judge(self, admission: Admission, step: Step) -> Verdict:
        """The final answer to ``step``. Records a failure: call it once per step, and
        only when the answer will be sent (not after the client has gone)."""
        tenants = self.tenants
        if step.succeeded and tenants is not None and tenants.blocked(step.tenant):
            step = fail("tenant_blocked", step.claimed or step.principal)
        limiter = self.limiter
        if not step.done or step.succeeded or limiter is None:
            return Verdict(step)
        keys = list(admission.keys)
        if step.claimed and principal_key(step.claimed) not in keys:
            keys.append(principal_key(step.claimed))
        delay, newly_locked = limiter.failed(*keys, refused=admission.locked)
        return Verdict(step, delay, tuple(_lockout(key, limiter.lockout_s) for key in newly_locked))


def _lockout(key: str, seconds: float) -> Lockout:
    kind, _, name = key.partition(":")  # "addr:<host>" or "principal:<claimed>"
    return Lockout("host" if kind == "addr" else "principal", name, seconds)
