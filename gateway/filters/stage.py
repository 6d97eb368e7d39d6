"""The operators' filters as a stage of the request chain (after authentication, before
authorization, so authorization judges what they made)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..enforcement.verdict import Deferred, Verdict
from ..slots import NEXT, Fault, Outcome, PendingWork, Request, Slot
from .chain import Rejected, Waiting

if TYPE_CHECKING:
    from ..stage_api import Connection


def run_filters(session: Connection, request: Request) -> Outcome:
    chain = session.filters
    assert chain is not None
    if request.exchange is not None and chain.scoped:  # the access log's ``namespace``
        request.exchange.namespace = chain.namespace_prefix()
    if not chain.wants(request.key):
        return NEXT
    outcome = chain.request_frame(
        request.data, request.key, request.version, request.correlation_id
    )
    if isinstance(outcome, Waiting):  # the core awaits it, then the request goes again
        slot = Slot(request.key, request.version, request.correlation_id, False, request.exchange)
        deferred = Deferred(f"filter {outcome.name}", outcome.run, _not_finished)
        session.hold_work(
            PendingWork(
                deferred,
                request.data,
                0,
                slot,
                resume=lambda _: session.run_from(run_filters, request),
            )
        )
        return None
    if not isinstance(outcome, Rejected):
        if outcome is not request.data:
            request.replace(outcome)
        return NEXT
    if request.exchange is not None:
        request.exchange.decision = "deny"
        request.exchange.rule = f"filter:{outcome.name}"
    if outcome.reply is None:  # nothing to answer with: close, as Kafka does
        session.refuse_unanswered(request.exchange, int(outcome.code.value))
        raise Fault("client", f"Produce with acks=0 was refused by filter {outcome.name}")
    session.answer(request, outcome.reply)
    return None


def _not_finished(_outcome: object) -> Verdict:
    raise AssertionError("a filter's wait is resumed, never finished")  # session.complete_work
