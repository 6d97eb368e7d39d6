"""One client connection's per-request work, as a chain of stages, with no I/O.

``core.Connection`` drives it: ``on_request(frame)`` returns the frame to forward (or
``None`` when answered or held here), ``on_response(frame)`` takes the broker's next
answer, and ``take_ready`` gives the answers due, in request order. A request meets
the stages of ``self.stages`` in order until one finishes it (docs/apis.md lists them
and what each API meets): version negotiation, SASL, operators' filters, fetch
sessions, authorization with the quota admin APIs and licences, and the forward at
the end, which charges quotas. Each stage lives with its feature and uses the small
API below (``answer``, ``expect``, ``hold_step``, ``hold_work``, ``mute``…). A
response goes back through fetch-session bookkeeping, authorization's merge, the
filters, address rewriting and the throttle time (``_transform``). A SASL step or
local work waits in ``pending_step`` / ``pending_work`` until the core hands back
its result. Produce with acks=0 gets no slot. Violations raise ``Fault``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from .accesslog.counting import scan
from .accesslog.exchange import Exchange, produce_answered, refused_unanswered, response_scanned
from .accesslog.exchange import abandoned as abandoned_exchange
from .accesslog.exchange import begin_parsed as begin_exchange
from .accesslog.exchange import complete as complete_exchange
from .accesslog.exchange import count_produce as count_exchange
from .addresses.rewrite import hints_by_walk, needs_rewrite, rewrite
from .addresses.topology import ConnectionMap, PublicMap, UnmappableBroker
from .enforcement.denials import DenialLog
from .enforcement.fetch_sessions import FetchSessions, fetch_outcome
from .enforcement.fetch_stage import fetch_sessions
from .enforcement.stage import authorize, finish_work
from .filters.stage import run_filters
from .identity import ClientIdentity
from .protocol import apis
from .protocol.api_versions import Advertised, default_advertised, rewrite_api_versions
from .protocol.apis import ApiSpec
from .protocol.codec import (
    ProtocolError,
    decode_response,
    encode_body,
    frame_produce_acks,
    peek_request,
    response_body_offset,
    response_correlation_id,
)
from .protocol.framing import Frame, frame
from .protocol.negotiation import negotiate
from .quotas.throttle import Throttle, with_throttle_time
from .sasl.connection import Authentication, PendingStep, with_sasl_apis
from .sasl.stage import authenticate, finish_step
from .slots import NEXT, Fault, Outcome, PendingWork, Request, Side, Slot

__all__ = ["Fault", "Session", "Side"]  # Fault and Side live in slots.py
FETCHES = frozenset({apis.FETCH, apis.SHARE_FETCH})  # answers charged to fetch bytes

if TYPE_CHECKING:
    from .enforcement import Enforcer
    from .filters.chain import BoundChain
    from .quotas.admin import QuotaAdmin
    from .sasl import Step

log = logging.getLogger("kgw.authz")
Stage = Callable[["Session", Request], Outcome]


class Session:
    """The state of one client connection and its upstream connection."""

    def __init__(
        self,
        mapping: PublicMap,
        identity: ClientIdentity,
        enforcer: Enforcer | None = None,
        auth: Authentication | None = None,
        observe: bool = False,
        throttle: Throttle | None = None,
        admin: QuotaAdmin | None = None,
        bind_fetch_sessions: bool = False,
        filters: BoundChain | None = None,
    ) -> None:
        self.identity = identity
        self.enforcer = enforcer
        self.auth = auth
        self.throttle = throttle
        self.admin = admin  # quota APIs and licence limits (with quotas configured)
        self.filters = filters  # operators' filters (``filters.chain``)
        self.mapping = mapping
        self._addresses = ConnectionMap(mapping)  # notes brokers first seen here
        self.observe = observe
        # Fetch sessions are tracked wherever the gateway authorizes or answers a Fetch,
        # or is asked to keep them with their connection.
        tracked = enforcer is not None or throttle is not None or bind_fetch_sessions
        self.fetch_sessions = FetchSessions() if tracked else None
        base: Advertised = default_advertised if enforcer is None else enforcer.advertised
        self._advertised: Advertised = base if auth is None else with_sasl_apis(base)
        if filters is not None and filters.narrows:  # e.g. namespaces: mapped APIs only
            offered, narrowing = self._advertised, filters
            self._advertised = lambda key: narrowing.advertised(key, offered(key))
        self.stages: tuple[Stage, ...] = self._chain()
        self.pending_step: PendingStep | None = None
        self.step_slot: Slot | None = None
        self.pending_work: PendingWork | None = None
        self._mute_ms = 0.0  # how long the core should stop reading (KIP-219)
        self.finished: list[Exchange] = []  # exchanges whose response left (for the access log)
        self._order: deque[Slot] = deque()
        self._waiting: deque[Slot] = deque()
        self.close_after_flush: str | None = None
        self.requests = 0
        self._denials = DenialLog()

    def _chain(self) -> tuple[Stage, ...]:
        """The request stages this connection's configuration calls for, in order."""
        stages: list[Stage] = [negotiate]
        if self.auth is not None:
            stages.append(authenticate)
        if self.filters is not None:
            stages.append(run_filters)
        if self.fetch_sessions is not None:
            stages.append(fetch_sessions)
        if self.enforcer is not None or self.admin is not None:
            stages.append(authorize)
        return tuple(stages)

    @property
    def inflight(self) -> int:
        """Responses owed to the client (upstream or ready but not yet taken)."""
        return len(self._order)

    @property
    def awaiting_upstream(self) -> int:
        return len(self._waiting)

    def advertised(self, key: int) -> ApiSpec | None:
        return self._advertised(key)

    # -- client → upstream ----------------------------------------------------

    def on_request(self, data: bytes) -> bytes | None:
        if self.close_after_flush is not None:
            return None  # the connection is closing; nothing more is read
        self.requests += 1
        try:
            prefix = peek_request(memoryview(data)[4:])
            key, version, correlation_id = prefix
            exchange = head = None
            if self.observe:  # Produce: records counted below, from the body if decoded
                exchange, head = begin_exchange(data, None, key != apis.PRODUCE, prefix)
        except ProtocolError as exc:
            raise Fault("client", str(exc)) from None
        request = Request(data, key, version, correlation_id, exchange, head)
        outcome: Outcome = NEXT
        try:
            for stage in self.stages:
                outcome = stage(self, request)
                if outcome is not NEXT:
                    break
        except Fault:
            if exchange is not None and key == apis.PRODUCE:  # refused, recorded unanswered
                count_exchange(exchange, data, request.decoded if request.data is data else None)
            raise
        if exchange is not None and key == apis.PRODUCE:
            # the frame as the client sent it (a filter may have replaced it since)
            body = request.decoded if request.data is data else None
            count_exchange(exchange, data, body)
        if outcome is not NEXT:
            return outcome  # type: ignore[return-value]
        return self._forward(request)

    def _forward(self, request: Request) -> bytes:
        """The end of the chain: to the broker, charged to the quotas."""
        data = request.data
        if request.key == apis.PRODUCE and self._produce_acks(data) == 0:
            self.no_response(len(data), request.exchange)
            return data
        slot = Slot(request.key, request.version, request.correlation_id, True, request.exchange)
        self.expect(slot, len(data))
        return data

    # -- what the stages use --------------------------------------------------

    def answer(self, request: Request, reply: bytes, version: int | None = None) -> None:
        """Answer ``request`` here with the frame ``reply``, in its place in the order."""
        version = request.version if version is None else version
        slot = Slot(request.key, version, request.correlation_id, False, request.exchange)
        slot.data = reply
        self._order.append(slot)

    def expect(self, slot: Slot, size: int = 0, ordered: bool = False) -> None:
        """``slot`` now awaits a broker response (``ordered``: it holds its place already);
        a forwarded request of ``size`` bytes is charged to the quotas."""
        if self.throttle is not None and size:
            slot.throttle_ms = self.throttle.on_request(slot.api_key, size)
            # Stop reading at once: pipelined requests already in the socket would
            # otherwise all pass before the throttled response goes out.
            self.mute(slot.throttle_ms)
        if not ordered:
            self._order.append(slot)
        self._waiting.append(slot)

    def no_response(self, size: int, exchange: Exchange | None) -> None:
        """Produce with acks=0: charged, and its exchange ends now, with no response."""
        throttle_ms = 0.0
        if self.throttle is not None:
            throttle_ms = self.throttle.on_request(apis.PRODUCE, size)
            self.mute(throttle_ms)
        if exchange is not None:
            exchange.throttle_ms = int(throttle_ms)
            self.finished.append(complete_exchange(exchange, None))

    def refuse_unanswered(self, exchange: Exchange | None, error_code: int) -> None:
        """A refused request with no answer to give (Produce with acks=0: the connection
        is closed instead): its exchange ends now with ``error_code``."""
        if exchange is not None:
            self.finished.append(refused_unanswered(exchange, error_code))

    def abandon(self) -> list[Exchange]:
        """The connection is closing: the exchanges finished already, then every one still
        owed a response, ended now as abandoned (``accesslog.exchange.abandoned``). Nothing
        is owed afterwards."""
        for slot in self._order:
            if slot.exchange is not None and slot.exchange.done is None:
                self.finished.append(abandoned_exchange(slot.exchange))
        self._order.clear()
        self._waiting.clear()
        return self.take_finished()

    def hold_step(self, pending: PendingStep, slot: Slot) -> None:
        """A SASL step for the core to run; its answer will take ``slot``'s place."""
        self._order.append(slot)
        self.step_slot = slot
        self.pending_step = pending

    def hold_work(self, work: PendingWork) -> None:
        """Local work for the core to run; the request keeps its place meanwhile."""
        self._order.append(work.slot)
        self.pending_work = work

    def mute(self, ms: float) -> None:
        self._mute_ms = max(self._mute_ms, ms)

    def log_denial(self, key: int, version: int) -> None:
        assert self.enforcer is not None
        self._denials.log(self.enforcer.last_denials, self.identity, key, version)

    def complete_step(self, step: Step) -> None:
        """The core ran ``pending_step``: queue its answer in order."""
        finish_step(self, step)

    def complete_work(self, outcome: object) -> bytes | None:
        """The core ran ``pending_work``: answer in the request's place, or return the
        frame to forward."""
        work = self.pending_work
        if work is not None and work.resume is not None:  # a filter waited
            self.pending_work = None
            self._order.remove(work.slot)  # the last one: later requests were held
            return work.resume(outcome)
        return finish_work(self, outcome)

    def run_from(self, stage: Stage, request: Request) -> bytes | None:
        """Take ``request`` through the chain again from ``stage`` on (the stage held it
        for local work, which is done)."""
        for item in self.stages[self.stages.index(stage) :]:
            outcome = item(self, request)
            if outcome is not NEXT:
                return outcome  # type: ignore[return-value]
        return self._forward(request)

    @property
    def muted(self) -> bool:
        """A throttle is pending: the core must not take more requests now."""
        return self._mute_ms > 0

    def take_mute(self) -> float:
        """Milliseconds the connection must not be read (0: none); resets."""
        ms, self._mute_ms = self._mute_ms, 0.0
        return ms

    def _produce_acks(self, data: bytes) -> int:
        try:
            return frame_produce_acks(data)
        except ProtocolError as exc:
            raise Fault("client", str(exc)) from None

    # -- upstream → client ----------------------------------------------------

    def on_response(self, data: Frame) -> None:
        if not self._waiting:
            raise Fault("upstream", "response with no request outstanding")
        slot = self._waiting.popleft()
        payload = memoryview(data)[4:]
        try:
            correlation_id = response_correlation_id(payload)
        except ProtocolError as exc:
            raise Fault("upstream", str(exc)) from None
        if correlation_id != slot.correlation_id:
            raise Fault(
                "upstream",
                f"correlation id {correlation_id} does not match {slot.correlation_id}",
            )
        slot.data = self._transform(slot, data, payload)

    def _transform(self, slot: Slot, data: Frame, payload: memoryview) -> Frame:
        key = slot.api_key
        try:
            if key == apis.API_VERSIONS:
                return frame(rewrite_api_versions(payload, slot.api_version, self._advertised))
            if slot.commit is not None:
                slot.commit(*fetch_outcome(payload, slot.api_version))
            if self.throttle is not None and key in FETCHES:  # share groups read too
                slot.throttle_ms = max(slot.throttle_ms, self.throttle.on_fetch_response(len(data)))
            rewriting = needs_rewrite(key, slot.api_version)
            throttled = slot.throttle_ms > 0
            filtered = self.filters is not None and self.filters.wants_response(key)
            if slot.merge is None and not throttled and not filtered:
                if rewriting and hints_by_walk(key, slot.api_version):
                    rewriting = self._carries_hints(slot, payload)
                if not rewriting:
                    return data
            response: Entity = decode_response(payload, key, slot.api_version)
            rewritten = response if slot.merge is None else slot.merge(response)
            if filtered:
                assert self.filters is not None
                rewritten = self.filters.response(
                    key, slot.api_version, slot.correlation_id, rewritten
                )
            if rewriting:
                rewritten = rewrite(key, rewritten, self._addresses)
            if throttled:
                rewritten = self._with_throttle(rewritten, slot)
            if key == apis.PRODUCE and slot.exchange is not None:
                produce_answered(slot.exchange, rewritten)  # no scan of the frame again
        except ProtocolError as exc:
            raise Fault("upstream", f"{apis.api_name(key)} v{slot.api_version}: {exc}") from None
        except UnmappableBroker as exc:
            raise Fault("gateway", str(exc)) from None
        if rewritten is response:
            return data
        header = bytes(payload[: response_body_offset(payload, key, slot.api_version)])
        return frame(header + encode_body(rewritten))

    def _carries_hints(self, slot: Slot, payload: memoryview) -> bool:
        """Whether a response that would be forwarded as it is carries a top-level tagged
        field (the leader hints): walked by its lengths, not decoded (decision 0051). The
        walk's figures go to the access log, which need not walk the frame again."""
        key, version = slot.api_key, slot.api_version
        offset = response_body_offset(payload, key, version)
        exchange = slot.exchange
        summary = scan(payload, offset, apis.response_schema(key, version), exchange is not None)
        if exchange is not None:
            response_scanned(exchange, summary)
        return summary.tagged > 0

    def _with_throttle(self, response: Any, slot: Slot) -> Any:
        """KIP-219: the client learns its throttle time; the connection goes quiet for
        what is left of it (muted since the charge: the broker's latency is not added)."""
        left = slot.throttle_ms if self.throttle is None else self.throttle.left_ms()
        self.mute(min(slot.throttle_ms, left))
        if slot.exchange is not None:
            slot.exchange.throttle_ms = int(slot.throttle_ms)
        return with_throttle_time(response, slot.throttle_ms)

    def take_ready(self) -> list[Frame]:
        order = self._order
        ready: list[Frame] = []
        while order and order[0].data is not None:
            slot = order.popleft()
            data: Frame = slot.data  # type: ignore[assignment]
            ready.append(data)
            if slot.exchange is not None:
                self.finished.append(complete_exchange(slot.exchange, data))
        return ready

    def take_finished(self) -> list[Exchange]:
        finished, self.finished = self.finished, []
        return finished

    def take_discovered(self) -> list[int]:
        """Brokers this connection's responses revealed first (they need listeners)."""
        found = self._addresses.discovered
        if not found:
            return found  # the usual case: no new list per response
        self._addresses.discovered = []
        return found
