"""Running the configured filters for one connection (``Session`` calls this). No I/O.

``FilterChain`` holds the filters built at start-up and which API keys any of them
wants; ``bind`` gives one connection its ``BoundChain`` (a context per filter).
Requests go through the filters in configured order, responses in reverse order.
A filter that raises becomes a ``Fault`` on the gateway's side: that connection
closes, every other goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import PRODUCE, ApiSpec, response_schema
from ..protocol.codec import (
    ProtocolError,
    decode_request,
    encode_body,
    encode_response,
    parse_request_head,
)
from ..protocol.framing import frame
from ..protocol.refusal import refuse
from ..slots import Fault
from .api import BaseFilter, Filter, FilterContext, RequestCall, ResponseCall

if TYPE_CHECKING:
    from ..identity import ClientIdentity

log = logging.getLogger("kgw.filters")
NEVER_FILTERED = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate


class FilterChain:
    """The configured filters, in order, and the API keys they want."""

    def __init__(self, filters: Sequence[Filter]) -> None:
        self.filters = tuple(filters)
        self._every = any(f.api_keys is None for f in self.filters)
        keys: set[int] = set()
        for item in self.filters:
            keys |= item.api_keys or set()
        self._keys = frozenset(keys) - NEVER_FILTERED
        # responses are decoded only for keys some filter has an on_response for
        answering = [f for f in self.filters if _answers(f)]
        self._every_response = any(f.api_keys is None for f in answering)
        self._response_keys = frozenset(k for f in answering for k in f.api_keys or ())

    def __bool__(self) -> bool:
        return bool(self.filters)

    def wants(self, api_key: int) -> bool:
        """Whether any filter wants this API key (else its frames pass undecoded)."""
        if api_key in NEVER_FILTERED:
            return False
        return self._every or api_key in self._keys

    def wants_response(self, api_key: int) -> bool:
        """Whether any filter's ``on_response`` wants this API key's responses."""
        if api_key in NEVER_FILTERED:
            return False
        return self._every_response or api_key in self._response_keys

    def bind(self, identity: ClientIdentity) -> BoundChain:
        return BoundChain(self, identity)


class Rejected:
    """A filter refused the request: answer ``code`` (and ``message``) on every entry.
    ``reply``: the answer's frame (``request_frame``; ``None`` for a Produce with acks=0,
    which has no answer)."""

    __slots__ = ("code", "message", "name", "reply")

    def __init__(self, name: str, code: ErrorCode, message: str | None) -> None:
        self.name = name
        self.code = code
        self.message = message
        self.reply: bytes | None = None


class Waiting:
    """A filter is not ready (``RequestCall.wait_for``): await ``run()``, then run the
    request hooks again."""

    __slots__ = ("name", "run")

    def __init__(self, name: str, run: Callable[[], Awaitable[Any]]) -> None:
        self.name = name
        self.run = run


class BoundChain:
    """One connection's view of the chain: a ``FilterContext`` per filter."""

    def __init__(self, chain: FilterChain, identity: ClientIdentity) -> None:
        self.chain = chain
        self._contexts = [
            FilterContext(identity, logging.getLogger(f"kgw.filters.{_name(item)}"))
            for item in chain.filters
        ]
        # optional hooks of built-in filters (the namespace filter): whether a filter
        # applies to this connection at all, and what ApiVersions offers it
        self._scoped = any(hasattr(item, "applies") for item in chain.filters)
        self._narrowing = [
            (item, context)
            for item, context in zip(chain.filters, self._contexts, strict=True)
            if hasattr(item, "advertise")
        ]

    @property
    def scoped(self) -> bool:
        """Whether some filter applies to some connections only (``applies``)."""
        return self._scoped

    def namespace_prefix(self) -> str | None:
        """The prefix a namespace filter maps this connection's names under, if any."""
        for item, context in zip(self.chain.filters, self._contexts, strict=True):
            prefix = getattr(item, "namespace_prefix", None)
            if prefix is not None:
                found: str | None = prefix(context)
                if found is not None:
                    return found
        return None

    @property
    def narrows(self) -> bool:
        """Whether some filter narrows what ApiVersions offers (``advertise``)."""
        return bool(self._narrowing)

    def advertised(self, api_key: int, spec: ApiSpec | None) -> ApiSpec | None:
        """``spec`` (what would be offered for ``api_key``) as the filters narrow it."""
        for item, context in self._narrowing:
            spec = item.advertise(context, api_key, spec)
            if spec is None:
                return None
        return spec

    def wants(self, api_key: int) -> bool:
        if not self.chain.wants(api_key):
            return False
        return not self._scoped or bool(self._filters(api_key))

    def wants_response(self, api_key: int) -> bool:
        if not self.chain.wants_response(api_key):
            return False
        return not self._scoped or any(_answers(item) for item, _ in self._filters(api_key))

    def request_frame(
        self, data: bytes, key: int, version: int, correlation_id: int
    ) -> bytes | Rejected | Waiting:
        """Run the request hooks on a request frame: the frame to go on with (``data``
        itself when no filter replaced it), the ``Rejected`` with its reply frame, or
        ``Waiting`` (a filter needs local work done first)."""
        payload = memoryview(data)[4:]
        parsed: list[Any] = []

        def decode() -> Any:
            if not parsed:
                try:
                    head = parse_request_head(payload)
                    parsed[:] = [head, decode_request(head, payload)]
                except ProtocolError as exc:
                    raise Fault("client", str(exc)) from None
            return parsed[1]

        outcome = self.request(key, version, correlation_id, decode)
        if outcome is None:
            return data
        if isinstance(outcome, Waiting):
            return outcome
        if isinstance(outcome, Rejected):
            request = decode()
            if key != PRODUCE or int(request.acks) != 0:
                body = refuse(request, response_schema(key, version), outcome.code, outcome.message)
                outcome.reply = encode_response(key, version, correlation_id, body)
            return outcome
        head = parsed[0]
        return frame(bytes(payload[: head.body_offset]) + encode_body(outcome))

    def request(
        self, api_key: int, version: int, correlation_id: int, decode: Callable[[], Any]
    ) -> Any | Rejected | Waiting | None:
        """Run the request hooks: the body to forward instead, a ``Rejected``, a
        ``Waiting``, or ``None`` when no filter replaced it."""
        source = decode
        replaced = False
        for item, context in self._filters(api_key):
            call = RequestCall(api_key, version, correlation_id, context, source)
            self._run(item, "on_request", call)
            if call.waiting is not None:
                return Waiting(_name(item), call.waiting)
            if call.rejection is not None:
                code, message = call.rejection
                try:
                    error = ErrorCode(code)
                    if error == ErrorCode.none:
                        raise ValueError(code)  # "no error" would tell the client it worked
                except ValueError:
                    reason = f"filter {_name(item)} rejected with unknown error code {code}"
                    raise Fault("gateway", reason) from None
                return Rejected(_name(item), error, message)
            if call.decoded is not None:  # the next filter sees what this one saw or made
                source = _const(call.decoded)
                replaced = replaced or call.replaced
        return source() if replaced else None

    def response(self, api_key: int, version: int, correlation_id: int, body: Any) -> Any:
        """Run the response hooks (reverse order) on the decoded ``body``; returns the same
        object when no filter replaced it."""
        for item, context in reversed(self._filters(api_key)):
            call = ResponseCall(api_key, version, correlation_id, context, _const(body))
            self._run(item, "on_response", call)
            if call.replaced:
                body = call.body
        return body

    def local_response(self, api_key: int, version: int, correlation_id: int, body: Any) -> Any:
        """An answer the gateway made itself (a refusal by authorization, a throttled
        Fetch) through the response hooks of the filters that ask to see those
        (``sees_local_answers``: the namespace filter, so a transparent tenant's refusal
        names its topics as it does). Operators' filters see broker answers only."""
        for item, context in reversed(self._filters(api_key)):
            if not getattr(item, "sees_local_answers", False):
                continue
            call = ResponseCall(api_key, version, correlation_id, context, _const(body))
            self._run(item, "on_response", call)
            if call.replaced:
                body = call.body
        return body

    def _filters(self, api_key: int) -> list[tuple[Filter, FilterContext]]:
        if api_key in NEVER_FILTERED:
            return []
        return [
            (item, context)
            for item, context in zip(self.chain.filters, self._contexts, strict=True)
            if (item.api_keys is None or api_key in item.api_keys)
            and (not self._scoped or _applies(item, context))
        ]

    @staticmethod
    def _run(item: Filter, hook: str, call: RequestCall | ResponseCall) -> None:
        try:
            getattr(item, hook)(call)
        except Fault:
            raise
        except Exception as exc:  # contained: this connection closes, no other
            name = _name(item)
            log.error(
                "filter %s failed in %s: %s",
                name,
                hook,
                type(exc).__name__,
                extra={"event": "filter_failed", "filter": name, "api_key": call.api_key},
            )
            # the traceback only at DEBUG: an exception's text may quote the message
            log.debug("filter %s traceback", name, exc_info=exc)
            raise Fault("gateway", f"filter {name} failed: {type(exc).__name__}") from None


def _answers(item: Filter) -> bool:
    """Whether the filter has a response hook of its own (not ``BaseFilter``'s no-op)."""
    hook = getattr(type(item), "on_response", None)
    return hook is not None and hook is not BaseFilter.on_response


def _applies(item: Filter, context: FilterContext) -> bool:
    applies = getattr(item, "applies", None)
    return applies is None or bool(applies(context))


def _name(item: Filter) -> str:
    return getattr(item, "name", "") or type(item).__name__


def _const(value: Any) -> Callable[[], Any]:
    return lambda: value
