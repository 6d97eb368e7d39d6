"""What every server mechanism shares: the ``Step`` it answers with, the
``ServerMechanism`` protocol, and the client-safe failure messages.

A mechanism is a small state machine fed the client's ``auth_bytes`` one
SaslAuthenticate at a time. It never raises for anything the client sent: bad
input, unknown users and wrong secrets all end in ``Step(done=True, error=...)``
whose ``error`` is safe to send and never tells whether the user exists.
``reason`` and ``claimed`` are for the access log only (never secrets, never
SASL bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

AUTH_FAILED = "Authentication failed: Invalid username or password"
MALFORMED = "Authentication failed: malformed SASL message"
KERBEROS_FAILED = "Authentication failed: Kerberos authentication failed"
ALREADY_DONE = "Authentication failed: the SASL exchange is already finished"
# the same for every name, known or not, and for a locked address
LOCKED_OUT = "Authentication failed: too many failed attempts, try again later"
MAX_CLAIMED_CHARS = 256


@dataclass(frozen=True, slots=True)
class Step:
    """One answer of a mechanism to one client message."""

    challenge: bytes | None  # bytes for SaslAuthenticate's auth_bytes (b"" allowed)
    done: bool  # the exchange is finished (success or failure)
    principal: str | None = None  # "User:<name>" on success
    error: str | None = None  # on failure: a message safe for the client
    api_key_id: str | None = None
    tenant: str | None = None
    session_lifetime_ms: int | None = None  # credential expiry / ticket end, if any
    claimed: str | None = None  # the name the client claimed, once known (for logs)
    reason: str | None = None  # why it failed, for logs only (never sent)

    @property
    def succeeded(self) -> bool:
        return self.done and self.error is None and self.principal is not None


class ServerMechanism(Protocol):
    """The server side of one SASL exchange on one connection."""

    name: str

    async def step(self, client_bytes: bytes) -> Step:
        """Consume one client message; never blocks the event loop."""
        ...


def clip(name: str) -> str:
    """A client-supplied name made safe for the logs: at most ``MAX_CLAIMED_CHARS``
    characters (then ``…``), control, format, separator (other than space), private-use
    and unassigned characters and lone surrogates each replaced by ``?``. The client
    controls it entirely: it must not break a log line or a terminal, nor grow a record."""
    bounded = name[: MAX_CLAIMED_CHARS + 1]
    if not bounded.isprintable():  # false for every "Other" and "Separator" but space
        bounded = "".join(ch if ch.isprintable() else "?" for ch in bounded)
    return bounded if len(bounded) <= MAX_CLAIMED_CHARS else bounded[:MAX_CLAIMED_CHARS] + "…"


def fail(reason: str, claimed: str | None = None, error: str = AUTH_FAILED) -> Step:
    return Step(
        challenge=None,
        done=True,
        error=error,
        reason=reason,
        claimed=None if claimed is None else clip(claimed),
    )


def malformed(reason: str, claimed: str | None = None) -> Step:
    return fail(reason, claimed, MALFORMED)


def already_done() -> Step:
    return fail("step_after_done", None, ALREADY_DONE)
