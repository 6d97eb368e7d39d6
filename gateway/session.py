"""One client connection's per-request protocol work, with no I/O.

``core.Connection`` drives it: ``on_request(frame)`` returns the frame to forward (or
``None`` when answered or held here), ``on_response(frame)`` takes the broker's next
answer, and ``take_ready`` gives the answers due, in request order. A SASL step or
local work it cannot finish itself waits in ``pending_step`` / ``pending_work`` until
the core hands back its result (``complete_step`` / ``complete_work``). Along the way:
operators' filters, authorization, fetch sessions, quotas, address rewriting and the
access log's exchanges. Produce with acks=0 gets no slot. Violations raise ``Fault``.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from .accesslog.exchange import Exchange
from .accesslog.exchange import begin as begin_exchange
from .accesslog.exchange import complete as complete_exchange
from .accesslog.records import Resources, decision_of, resources_of
from .addresses.rewrite import needs_rewrite, rewrite
from .addresses.topology import ConnectionMap, PublicMap, UnmappableBroker
from .enforcement.denials import DenialLog
from .enforcement.fetch_sessions import FetchSessions, fetch_outcome
from .enforcement.units import is_replica
from .filters.chain import Rejected
from .identity import ClientIdentity
from .protocol import apis
from .protocol.api_versions import (
    Advertised,
    default_advertised,
    rewrite_api_versions,
    unsupported_api_versions,
)
from .protocol.codec import (
    ProtocolError,
    RequestHead,
    decode_request,
    decode_response,
    encode_body,
    encode_response,
    frame_produce_acks,
    parse_request_head,
    peek_request,
    response_body_offset,
    response_correlation_id,
)
from .protocol.framing import frame
from .protocol.refusal import refuse_version
from .quotas.throttle import Throttle, with_throttle_time
from .sasl.connection import (
    SASL_APIS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Authentication,
    PendingStep,
    with_sasl_apis,
)
from .slots import Fault, PendingWork, Side, Slot

__all__ = ["Fault", "Session", "Side"]  # Fault and Side live in slots.py

if TYPE_CHECKING:
    from .enforcement import Enforcer
    from .enforcement.verdict import Verdict
    from .filters.chain import BoundChain
    from .quotas.admin import QuotaAdmin
    from .sasl import Step

log = logging.getLogger("kgw.authz")


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
        self.throttle = throttle
        self.admin = admin  # quota APIs and licence limits (with quotas configured)
        self.pending_work: PendingWork | None = None
        self._mute_ms = 0.0  # how long the network layer should stop reading (KIP-219)
        self.mapping = mapping
        self._addresses = ConnectionMap(mapping)  # notes brokers first seen here
        self.filters = filters  # operators' filters (``filters.chain``)
        self.observe = observe
        self.finished: list[Exchange] = []  # exchanges whose response left (for the access log)
        self._exchange: Exchange | None = None  # the request being handled
        self.identity = identity
        self.enforcer = enforcer
        self.auth = auth
        self.pending_step: PendingStep | None = None
        self._step_slot: Slot | None = None
        base: Advertised = default_advertised if enforcer is None else enforcer.advertised
        self._advertised: Advertised = base if auth is None else with_sasl_apis(base)
        # Fetch sessions are tracked wherever the gateway authorizes or answers a Fetch,
        # or is asked to keep them with their connection.
        tracked = enforcer is not None or throttle is not None or bind_fetch_sessions
        self.fetch_sessions = FetchSessions() if tracked else None
        self._order: deque[Slot] = deque()
        self._waiting: deque[Slot] = deque()
        self.close_after_flush: str | None = None
        self.requests = 0
        self._denials = DenialLog()

    @property
    def inflight(self) -> int:
        """Responses owed to the client (upstream or ready but not yet taken)."""
        return len(self._order)

    @property
    def awaiting_upstream(self) -> int:
        return len(self._waiting)

    # -- client → upstream ----------------------------------------------------

    def on_request(self, data: bytes) -> bytes | None:
        if self.close_after_flush is not None:
            return None  # the connection is closing; nothing more is read
        self.requests += 1
        try:
            key, version, correlation_id = peek_request(memoryview(data)[4:])
            self._exchange = begin_exchange(data) if self.observe else None
        except ProtocolError as exc:
            raise Fault("client", str(exc)) from None
        if key == apis.API_VERSIONS:
            return self._api_versions(data, version, correlation_id)
        spec = self._advertised(key)
        if spec is None or not spec.min_version <= version <= spec.max_version:
            self._refuse_version(data, key, version, correlation_id)
            return None
        if self.auth is not None:
            if key in SASL_APIS:
                self._sasl(data, key, version, correlation_id)
                return None
            if not self.auth.authenticated:
                raise Fault("client", f"{apis.api_name(key)} sent before SASL authentication")
            if self.auth.expired():
                raise Fault("client", "SASL session lifetime ended without re-authentication")
        if self.filters is not None and self.filters.wants(key):
            filtered = self._filter(data, key, version, correlation_id)
            if filtered is None:
                return None
            data = filtered
        if key == apis.FETCH and self.fetch_sessions is not None:
            return self._fetch(data, version, correlation_id)
        if self.enforcer is not None or (self.admin is not None and key in self.admin.api_keys):
            return self._enforce(data, key, version, correlation_id)
        if key == apis.PRODUCE and self._produce_acks(data) == 0:
            self._no_response(len(data))
            return data
        self._expect(Slot(key, version, correlation_id, True, self._exchange), len(data))
        return data

    def _filter(self, data: bytes, key: int, version: int, correlation_id: int) -> bytes | None:
        """Operators' filters see the request first (authorization then judges what they
        made); the frame to go on with, or ``None`` when a filter refused it."""
        assert self.filters is not None
        outcome = self.filters.request_frame(data, key, version, correlation_id)
        if not isinstance(outcome, Rejected):
            return outcome
        if self._exchange is not None:
            self._exchange.decision = "deny"
            self._exchange.rule = f"filter:{outcome.name}"
        if outcome.reply is None:  # nothing to answer with: close, as Kafka does
            raise Fault("client", f"Produce with acks=0 was refused by filter {outcome.name}")
        self._local(key, version, correlation_id, outcome.reply)
        return None

    def _fetch(self, data: bytes, version: int, correlation_id: int) -> bytes | None:
        """A Fetch, through the connection's fetch sessions (``FetchSessions``): what it
        reads is authorized whole, sessions included; over the fetch quota it is
        answered here, empty, with the session's epoch kept right."""
        assert self.fetch_sessions is not None
        payload, head, request = _decode(data)
        response_cls = apis.response_schema(apis.FETCH, version)
        enforcer = self.enforcer
        if enforcer is not None and is_replica(request):  # a follower's fetch
            return self._enforce(data, apis.FETCH, version, correlation_id)
        blocked = self.throttle.fetch_blocked_ms() if self.throttle is not None else 0.0
        allowed = enforcer.reader() if enforcer is not None else None
        plan = self.fetch_sessions.plan(request, response_cls, allowed, local=blocked > 0)
        exchange = self._exchange
        if exchange is not None:
            read = len(plan.effective) - plan.denied  # partitions not refused
            exchange.decision = decision_of(enforcer is not None, plan.denied, read > 0)
            topics = tuple(dict.fromkeys(str(topic) for topic, _ in plan.effective))
            exchange.resources = Resources(topics=topics, partitions=len(plan.effective))
            exchange.rule = enforcer.last_rule if enforcer is not None else None
        if plan.denied and enforcer is not None:
            self._log_denial(apis.FETCH, version)
        if plan.forward is None:
            body: Any = plan.local
            if blocked > 0:  # over the fetch quota: no broker involved
                body = with_throttle_time(body, blocked)
                if exchange is not None:
                    exchange.throttle_ms = int(blocked)
                self._mute(blocked)
            reply = encode_response(apis.FETCH, version, correlation_id, body)
            self._local(apis.FETCH, version, correlation_id, reply)
            return None
        out = data
        if plan.forward is not request:
            out = frame(bytes(payload[: head.body_offset]) + encode_body(plan.forward))
        slot = Slot(apis.FETCH, version, correlation_id, True, exchange)
        slot.merge, slot.commit = plan.merge, plan.commit
        self._expect(slot, len(out))
        return out

    def _mute(self, ms: float) -> None:
        self._mute_ms = max(self._mute_ms, ms)

    def take_mute(self) -> float:
        """Milliseconds the connection must not be read (0: none); resets."""
        ms, self._mute_ms = self._mute_ms, 0.0
        return ms

    def _no_response(self, size: int) -> None:
        """Produce with acks=0: its exchange ends now, with no response."""
        if self.throttle is not None:
            self._mute(self.throttle.on_request(apis.PRODUCE, size))
        if self._exchange is not None:
            self.finished.append(complete_exchange(self._exchange, None))

    def _sasl(self, data: bytes, key: int, version: int, correlation_id: int) -> None:
        assert self.auth is not None
        request = _decode(data)[2]
        response_cls = apis.response_schema(key, version)
        if key == SASL_HANDSHAKE:
            response, refused = self.auth.handshake(request, response_cls)
            reply = encode_response(key, version, correlation_id, response)
            self._local(key, version, correlation_id, reply)
            if refused is not None:
                self.close_after_flush = f"SASL handshake refused: {refused}"
            return
        if self.pending_step is not None:
            raise Fault("client", "SaslAuthenticate sent while the previous step is running")
        pending = self.auth.begin(request, version, correlation_id)
        if pending is None:
            raise Fault("client", "SaslAuthenticate without a SaslHandshake")
        slot = Slot(key, version, correlation_id, False, self._exchange)
        self._order.append(slot)
        self._step_slot = slot
        self.pending_step = pending

    def complete_step(self, step: Step) -> None:
        """The network layer ran ``pending_step``: queue its answer in order."""
        assert self.auth is not None and self.pending_step is not None
        assert self._step_slot is not None
        pending, slot = self.pending_step, self._step_slot
        self.pending_step = self._step_slot = None
        response_cls = apis.response_schema(SASL_AUTHENTICATE, pending.api_version)
        response = self.auth.finish(pending, step, response_cls)
        slot.data = encode_response(
            SASL_AUTHENTICATE, pending.api_version, pending.correlation_id, response
        )
        if response.error_code != 0:
            self.close_after_flush = "SASL authentication failed"

    def _expect(self, slot: Slot, size: int = 0, ordered: bool = False) -> None:
        """``slot`` now awaits a broker response (``ordered``: it holds its place already)."""
        if self.throttle is not None and size:
            slot.throttle_ms = self.throttle.on_request(slot.api_key, size)
            # Stop reading at once: pipelined requests already in the socket would
            # otherwise all pass before the throttled response goes out.
            self._mute(slot.throttle_ms)
        if not ordered:
            self._order.append(slot)
        self._waiting.append(slot)

    def _enforce(self, data: bytes, key: int, version: int, correlation_id: int) -> bytes | None:
        """Authorize every part of the request (and apply quota admin and licence limits);
        forward only what is allowed."""
        _payload, head, request = _decode(data)
        response_cls = apis.response_schema(key, version)
        enforcer = self.enforcer
        if enforcer is None:
            from .enforcement.verdict import PASS

            verdict = PASS
        else:
            verdict = enforcer.decide(key, request, response_cls)
        if self.admin is not None and key in self.admin.api_keys:
            verdict = self.admin.decide(key, request, response_cls, verdict)
        no_response = key == apis.PRODUCE and int(request.acks) == 0
        if self._exchange is not None:
            self._exchange.decision = decision_of(
                enforcer is not None, verdict.denied, verdict.forward is not None
            )
            self._exchange.resources = resources_of(request)
            self._exchange.rule = enforcer.last_rule if enforcer is not None else None
        if verdict.denied and enforcer is not None:
            self._log_denial(key, version)
            if no_response:  # nothing to answer with: close, as Kafka does
                raise Fault("client", "Produce with acks=0 was denied by authorization")
        offset = head.body_offset
        if verdict.defer is not None:  # the network layer runs it; the answer keeps its place
            slot = Slot(key, version, correlation_id, False, self._exchange)
            self._order.append(slot)
            self.pending_work = PendingWork(verdict.defer, data, offset, slot)
            return None
        return self._carry_out(verdict, key, version, correlation_id, data, offset, no_response)

    def _carry_out(
        self,
        verdict: Verdict,
        key: int,
        version: int,
        correlation_id: int,
        data: bytes,
        body_offset: int,
        no_response: bool = False,
        slot: Slot | None = None,
    ) -> bytes | None:
        """Answer locally or forward, as ``verdict`` says; ``slot``: the request's place,
        taken already (deferred work)."""
        if verdict.local is not None:
            reply = encode_response(key, version, correlation_id, verdict.local)
            if slot is None:
                self._local(key, version, correlation_id, reply)
            else:
                slot.data = reply
            return None
        out = data
        if verdict.rewritten:
            forward: Any = verdict.forward
            out = frame(bytes(memoryview(data)[4 : 4 + body_offset]) + encode_body(forward))
        if no_response:
            self._no_response(len(out))
            return out
        if slot is None:
            slot = Slot(key, version, correlation_id, True, self._exchange)
            slot.merge = verdict.merge
            self._expect(slot, len(out))
        else:
            slot.upstream = True
            slot.merge = verdict.merge
            self._expect(slot, len(out), ordered=True)
        return out

    def complete_work(self, outcome: object) -> bytes | None:
        """The network layer ran ``pending_work`` (``outcome``: its result, or the exception
        it raised): answer in the request's place, or return the frame to forward."""
        work = self.pending_work
        assert work is not None
        self.pending_work = None
        slot = work.slot
        try:
            verdict = work.deferred.finish(outcome)
        except Exception as exc:  # a bug in the unit: the client must not wait forever
            raise Fault("gateway", f"{work.name} failed: {type(exc).__name__}") from None
        if verdict.defer is not None:
            raise Fault("gateway", f"{work.name} deferred twice")
        if slot.exchange is not None:
            slot.exchange.decision = decision_of(
                self.enforcer is not None, verdict.denied, verdict.forward is not None
            )
        return self._carry_out(
            verdict, slot.api_key, slot.api_version, slot.correlation_id, work.data,
            work.body_offset, slot=slot,
        )  # fmt: skip

    def _log_denial(self, key: int, version: int) -> None:
        assert self.enforcer is not None
        self._denials.log(self.enforcer.last_denials, self.identity, key, version)

    def _produce_acks(self, data: bytes) -> int:
        try:
            return frame_produce_acks(data)
        except ProtocolError as exc:
            raise Fault("client", str(exc)) from None

    def _api_versions(self, data: bytes, version: int, correlation_id: int) -> bytes | None:
        spec = apis.gateway_apis()[apis.API_VERSIONS]
        if version > spec.max_version or version < spec.min_version:
            self._local(
                apis.API_VERSIONS, 0, correlation_id, unsupported_api_versions(correlation_id)
            )
            return None
        self._expect(Slot(apis.API_VERSIONS, version, correlation_id, True, self._exchange))
        return data

    def _refuse_version(self, data: bytes, key: int, version: int, correlation_id: int) -> None:
        """UNSUPPORTED_VERSION as a broker answers it (``refusal.refuse_version``). Before
        SASL completes anything but the SASL APIs closes the connection."""
        if self.auth is not None and not self.auth.authenticated and key not in SASL_APIS:
            raise Fault("client", f"{apis.api_name(key)} sent before SASL authentication")
        try:
            reply, close = refuse_version(data, key, version, correlation_id)
        except ProtocolError as exc:
            raise Fault("client", str(exc)) from None
        self._local(key, version, correlation_id, reply)
        if close:
            self.close_after_flush = f"unsupported api key {key} version {version}"

    def _local(self, key: int, version: int, correlation_id: int, reply: bytes) -> None:
        slot = Slot(key, version, correlation_id, False, self._exchange)
        slot.data = reply
        self._order.append(slot)

    # -- upstream → client ----------------------------------------------------

    def on_response(self, data: bytes) -> None:
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

    def _transform(self, slot: Slot, data: bytes, payload: memoryview) -> bytes:
        key = slot.api_key
        try:
            if key == apis.API_VERSIONS:
                return frame(rewrite_api_versions(payload, slot.api_version, self._advertised))
            if slot.commit is not None:
                slot.commit(*fetch_outcome(payload, slot.api_version))
            if self.throttle is not None and key == apis.FETCH:
                slot.throttle_ms = max(slot.throttle_ms, self.throttle.on_fetch_response(len(data)))
            rewriting = needs_rewrite(key, slot.api_version)
            throttled = slot.throttle_ms > 0
            filtered = self.filters is not None and self.filters.wants_response(key)
            if not rewriting and slot.merge is None and not throttled and not filtered:
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
        except ProtocolError as exc:
            raise Fault("upstream", f"{apis.api_name(key)} v{slot.api_version}: {exc}") from None
        except UnmappableBroker as exc:
            raise Fault("gateway", str(exc)) from None
        if rewritten is response:
            return data
        header = bytes(payload[: response_body_offset(payload, key, slot.api_version)])
        return frame(header + encode_body(rewritten))

    def _with_throttle(self, response: Any, slot: Slot) -> Any:
        """KIP-219: the client learns its throttle time; the connection goes quiet for it."""
        self._mute(slot.throttle_ms)
        if slot.exchange is not None:
            slot.exchange.throttle_ms = int(slot.throttle_ms)
        return with_throttle_time(response, slot.throttle_ms)

    def take_ready(self) -> list[bytes]:
        order = self._order
        ready: list[bytes] = []
        while order and order[0].data is not None:
            slot = order.popleft()
            data: bytes = slot.data  # type: ignore[assignment]
            ready.append(data)
            if slot.exchange is not None:
                self.finished.append(complete_exchange(slot.exchange, data))
        return ready

    def take_finished(self) -> list[Exchange]:
        finished, self.finished = self.finished, []
        return finished

    def take_discovered(self) -> list[int]:
        """Brokers this connection's responses revealed first (they need listeners)."""
        found, self._addresses.discovered = self._addresses.discovered, []
        return found


def _decode(data: bytes) -> tuple[memoryview, RequestHead, Any]:
    """A request frame's payload, head and decoded body; ``Fault`` if it is malformed."""
    payload = memoryview(data)[4:]
    try:
        head = parse_request_head(payload)
        return payload, head, decode_request(head, payload)
    except ProtocolError as exc:
        raise Fault("client", str(exc)) from None
