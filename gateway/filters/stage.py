"""The operators' filters as a stage of the request chain (after authentication, before
authorization, so authorization judges what they made)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..slots import NEXT, Fault, Outcome, Request
from .chain import Rejected

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
    if not isinstance(outcome, Rejected):
        if outcome is not request.data:
            request.replace(outcome)
        return NEXT
    if request.exchange is not None:
        request.exchange.decision = "deny"
        request.exchange.rule = f"filter:{outcome.name}"
    if outcome.reply is None:  # nothing to answer with: close, as Kafka does
        raise Fault("client", f"Produce with acks=0 was refused by filter {outcome.name}")
    session.answer(request, outcome.reply)
    return None
