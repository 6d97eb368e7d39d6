"""What a stage of the request chain sees of its connection (``Session`` is one).

The built-in stages (``protocol/negotiation.py``, ``sasl/stage.py``,
``filters/stage.py``, ``enforcement/fetch_stage.py``, ``enforcement/stage.py``) are
written against this protocol rather than against ``Session`` itself, so the session
imports its stages and no stage imports the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from .accesslog.exchange import Exchange
    from .enforcement import Enforcer
    from .enforcement.fetch_sessions import FetchSessions
    from .filters.chain import BoundChain
    from .protocol.apis import ApiSpec
    from .quotas.admin import QuotaAdmin
    from .quotas.throttle import Throttle
    from .sasl.connection import Authentication, PendingStep
    from .slots import Outcome, PendingWork, Request, Slot


class Connection(Protocol):
    """The per-connection services and the small API a stage acts through."""

    auth: Authentication | None
    enforcer: Enforcer | None
    admin: QuotaAdmin | None
    throttle: Throttle | None
    filters: BoundChain | None
    fetch_sessions: FetchSessions | None
    pending_step: PendingStep | None
    step_slot: Slot | None
    pending_work: PendingWork | None
    close_after_flush: str | None

    def advertised(self, key: int) -> ApiSpec | None:
        """The versions of ``key`` this connection is offered (None: not offered)."""
        ...

    def answer(self, request: Request, reply: bytes, version: int | None = None) -> None:
        """Answer ``request`` here with the frame ``reply``, in its place in the order."""
        ...

    def expect(self, slot: Slot, size: int = 0, ordered: bool = False) -> None:
        """``slot`` awaits a broker response; a forwarded request is charged to quotas."""
        ...

    def no_response(self, size: int, exchange: Exchange | None) -> None:
        """Produce with acks=0: charged, its exchange ends now."""
        ...

    def refuse_unanswered(self, exchange: Exchange | None, error_code: int) -> None:
        """A refused request with no answer to give (Produce with acks=0: the connection
        is closed instead): its exchange ends now with ``error_code``."""
        ...

    def hold_step(self, pending: PendingStep, slot: Slot) -> None:
        """A SASL step for the core to run; its answer will take ``slot``'s place."""
        ...

    def hold_work(self, work: PendingWork) -> None:
        """Local work for the core to run; the request keeps its place meanwhile."""
        ...

    def run_from(
        self, stage: Callable[[Connection, Request], Outcome], request: Request
    ) -> bytes | None:
        """Take ``request`` through the chain again from ``stage`` on (held work done)."""
        ...

    def mute(self, ms: float) -> None:
        """Stop reading the client for ``ms`` (KIP-219)."""
        ...

    def log_denial(self, key: int, version: int) -> None:
        """The rate-limited denial line for the last authorization decision."""
        ...
