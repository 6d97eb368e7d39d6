"""The fetch-session stage of the request chain: a Fetch goes through the connection's
own fetch sessions (``FetchSessions``). What it reads is authorized whole, sessions
included; over the fetch quota it is answered here, empty, with the session's epoch
kept right. A follower's fetch goes on to the authorization stage."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kio.static.primitive import i32

from ..accesslog.records import Resources, decision_of, with_denied
from ..protocol import apis
from ..protocol.codec import encode_body, encode_response
from ..protocol.framing import frame
from ..quotas.throttle import with_throttle_time
from ..slots import NEXT, Outcome, Request, Slot
from .units import is_replica

if TYPE_CHECKING:
    from ..stage_api import Connection


def fetch_sessions(session: Connection, request: Request) -> Outcome:
    sessions = session.fetch_sessions
    if request.key != apis.FETCH or sessions is None:
        return NEXT
    payload, head, body = request.parsed()
    version = request.version
    enforcer = session.enforcer
    if enforcer is not None and is_replica(body):  # a follower's fetch
        return NEXT
    throttle = session.throttle
    blocked = throttle.fetch_blocked_ms() if throttle is not None else 0.0
    allowed = enforcer.reader() if enforcer is not None else None
    response_cls = apis.response_schema(apis.FETCH, version)
    plan = sessions.plan(body, response_cls, allowed, local=blocked > 0)
    exchange = request.exchange
    if exchange is not None:
        read = len(plan.effective) - plan.denied  # partitions not refused
        exchange.decision = decision_of(enforcer is not None, plan.denied, read > 0)
        topics = tuple(dict.fromkeys(str(topic) for topic, _ in plan.effective))
        exchange.resources = Resources(topics=topics, partitions=len(plan.effective))
        if enforcer is not None:
            exchange.rule = enforcer.last_rule
            if enforcer.last_denied:
                exchange.resources = with_denied(exchange.resources, enforcer.last_denied)
    if plan.denied and enforcer is not None:
        session.log_denial(apis.FETCH, version)
    if plan.forward is None:
        local: Any = plan.local
        if blocked > 0:  # over the fetch quota: no broker involved
            local = with_throttle_time(local, blocked)
            if exchange is not None:
                exchange.throttle_ms = int(blocked)
            session.mute(blocked)
        if session.filters is not None:  # in the tenant's names (a namespace filter)
            local = session.filters.local_response(
                apis.FETCH, version, request.correlation_id, local
            )
        session.answer(request, encode_response(apis.FETCH, version, request.correlation_id, local))
        return None
    out = request.data
    forward = plan.forward
    if throttle is not None:  # no more than the fetch quota can pay for in one answer
        forward = _within_quota(forward, throttle.fetch_most_bytes())
    if forward is not body:
        out = frame(bytes(payload[: head.body_offset]) + encode_body(forward))
    slot = Slot(apis.FETCH, version, request.correlation_id, True, exchange)
    slot.merge, slot.commit = plan.merge, plan.commit
    session.expect(slot, len(out))
    return out


def _within_quota(fetch: Any, most: int | None) -> Any:
    """``fetch`` with its ``max_bytes`` (v3+) no larger than ``most``."""
    if most is None or getattr(fetch, "max_bytes", None) is None or fetch.max_bytes <= most:
        return fetch
    return dataclasses.replace(
        fetch, max_bytes=i32(most), min_bytes=i32(min(int(fetch.min_bytes), most))
    )
