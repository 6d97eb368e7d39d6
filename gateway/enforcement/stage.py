"""The authorization stage of the request chain: every part of the request authorized
by the API's unit (``Enforcer.decide``), then the quota admin APIs and plan licence
limits (``quotas.admin.QuotaAdmin``); what is allowed is forwarded, the rest answered
here and merged back into the broker's answer. A verdict that needs local work (a
store write, a topic count) holds the request's place as the session's
``pending_work`` until the core hands back its outcome (``finish_work``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..accesslog.records import decision_of, produce_resources, resources_of, with_denied
from ..protocol import apis
from ..protocol.codec import encode_body, encode_response
from ..protocol.framing import frame
from ..slots import NEXT, Fault, Outcome, PendingWork, Request, Slot
from .acl_admin import ACL_APIS as LOCAL_ACL_APIS
from .toolkit import TOPIC_DENIED
from .verdict import PASS, Verdict

if TYPE_CHECKING:
    from ..stage_api import Connection


def authorize(session: Connection, request: Request) -> Outcome:
    key, version = request.key, request.version
    enforcer, admin = session.enforcer, session.admin
    administered = admin is not None and key in admin.api_keys
    if enforcer is None and not administered:
        return NEXT
    _payload, head, body = request.parsed()
    response_cls = apis.response_schema(key, version)
    scope = None  # a namespaced tenant's ACL answers stay inside its namespace (0034)
    if key in LOCAL_ACL_APIS and session.filters is not None:
        scope = session.filters.namespace_prefix()
    verdict = PASS if enforcer is None else enforcer.decide(key, body, response_cls, scope)
    if administered:
        assert admin is not None
        verdict = admin.decide(key, body, response_cls, verdict)
    no_response = key == apis.PRODUCE and int(body.acks) == 0
    exchange = request.exchange
    if exchange is not None:
        exchange.decision = decision_of(
            enforcer is not None, verdict.denied, verdict.forward is not None
        )
        exchange.resources = produce_resources(body) if key == apis.PRODUCE else resources_of(body)
        if enforcer is not None:
            exchange.rule = enforcer.last_rule
            if enforcer.last_denied:  # what was refused, by name (a partial record's part)
                exchange.resources = with_denied(exchange.resources, enforcer.last_denied)
    if verdict.denied and enforcer is not None:
        session.log_denial(key, version)
        if no_response:  # nothing to answer with: close, as Kafka does
            session.refuse_unanswered(exchange, TOPIC_DENIED.value)
            raise Fault("client", "Produce with acks=0 was denied by authorization")
    if verdict.defer is not None:  # the core runs it; the answer keeps its place
        slot = Slot(key, version, request.correlation_id, False, exchange)
        session.hold_work(PendingWork(verdict.defer, request.data, head.body_offset, slot))
        return None
    return carry_out(session, verdict, request, head.body_offset, no_response)


def carry_out(
    session: Connection,
    verdict: Verdict,
    request: Request,
    body_offset: int,
    no_response: bool = False,
    slot: Slot | None = None,
) -> bytes | None:
    """Answer locally or forward, as ``verdict`` says; ``slot``: the request's place,
    taken already (deferred work)."""
    key, version, correlation_id = request.key, request.version, request.correlation_id
    if verdict.local is not None:
        local = verdict.local
        if session.filters is not None and key not in LOCAL_ACL_APIS:  # ACLs: scoped already
            local = session.filters.local_response(key, version, correlation_id, local)
        reply = encode_response(key, version, correlation_id, local)
        if slot is None:
            session.answer(request, reply)
        else:
            slot.data = reply
        return None
    out = request.data
    if verdict.rewritten:
        forward: Any = verdict.forward
        out = frame(bytes(memoryview(out)[4 : 4 + body_offset]) + encode_body(forward))
    if no_response:
        session.no_response(len(out), request.exchange)
        return out
    ordered = slot is not None
    if slot is None:
        slot = Slot(key, version, correlation_id, True, request.exchange)
    slot.upstream = True
    slot.merge = verdict.merge
    session.expect(slot, len(out), ordered=ordered)
    return out


def finish_work(session: Connection, outcome: object) -> bytes | None:
    """The core ran ``pending_work`` (``outcome``: its result, or the exception it
    raised): answer in the request's place, or return the frame to forward."""
    work = session.pending_work
    assert work is not None
    session.pending_work = None
    slot = work.slot
    try:
        verdict = work.deferred.finish(outcome)
    except Exception as exc:  # a bug in the unit: the client must not wait forever
        raise Fault("gateway", f"{work.name} failed: {type(exc).__name__}") from None
    if verdict.defer is not None:
        raise Fault("gateway", f"{work.name} deferred twice")
    if slot.exchange is not None:
        slot.exchange.decision = decision_of(
            session.enforcer is not None, verdict.denied, verdict.forward is not None
        )
    request = Request(work.data, slot.api_key, slot.api_version, slot.correlation_id, slot.exchange)
    return carry_out(session, verdict, request, work.body_offset, slot=slot)
