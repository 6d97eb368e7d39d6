"""What a session owes the client, and how a connection ends: the small types the
core and the network layer share (``Session`` in session.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from .protocol.codec import ProtocolError, RequestHead, decode_request, parse_request_head
from .protocol.framing import Frame

if TYPE_CHECKING:
    from .accesslog.exchange import Exchange
    from .enforcement.verdict import Deferred

Merge = Callable[[Any], Any]
Side = Literal["client", "upstream", "gateway"]


class Fault(Exception):
    """The connection must close; ``side`` says whose fault it was."""

    def __init__(self, side: Side, reason: str) -> None:
        super().__init__(reason)
        self.side: Side = side
        self.reason = reason


class Slot:
    """A response the client is owed, in request order."""

    __slots__ = (
        "api_key", "api_version", "commit", "correlation_id", "data", "exchange", "merge",
        "throttle_ms", "upstream",
    )  # fmt: skip

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        upstream: bool,
        exchange: Exchange | None = None,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.upstream = upstream
        self.data: Frame | None = None  # the response, once it came
        self.merge: Merge | None = None
        self.commit: Callable[[int, int], None] | None = None  # a fetch session's bookkeeping
        self.exchange = exchange
        self.throttle_ms = 0.0


class PendingWork:
    """A request waiting for local work (``Deferred``) before it is answered or forwarded."""

    __slots__ = ("body_offset", "data", "deferred", "resume", "slot")

    def __init__(
        self,
        deferred: Deferred,
        data: bytes,
        body_offset: int,
        slot: Slot,
        resume: Callable[[object], bytes | None] | None = None,
    ) -> None:
        self.deferred = deferred
        self.data = data
        self.body_offset = body_offset
        self.slot = slot
        # the request is taken again through the chain once the work is done (a filter
        # waited: filters/stage.py); ``slot`` only kept its place meanwhile
        self.resume = resume

    @property
    def name(self) -> str:
        return self.deferred.name

    def run(self) -> Awaitable[Any]:
        return self.deferred.run()


class Request:
    """The request a stage of the chain looks at: its frame, its head, and its body
    decoded on demand (once, however many stages ask)."""

    __slots__ = ("_head", "_parsed", "correlation_id", "data", "exchange", "key", "version")

    def __init__(
        self,
        data: bytes,
        key: int,
        version: int,
        correlation_id: int,
        exchange: Exchange | None,
        head: RequestHead | None = None,
    ) -> None:
        """``head``: the header of ``data`` if the caller parsed it already."""
        self.data = data
        self.key = key
        self.version = version
        self.correlation_id = correlation_id
        self.exchange = exchange
        self._head = head
        self._parsed: tuple[memoryview, RequestHead, Any] | None = None

    def parsed(self) -> tuple[memoryview, RequestHead, Any]:
        """The payload, head and decoded body; ``Fault`` if the request is malformed."""
        if self._parsed is None:
            payload = memoryview(self.data)[4:]
            try:
                head = self._head or parse_request_head(payload)
                self._parsed = payload, head, decode_request(head, payload)
            except ProtocolError as exc:
                raise Fault("client", str(exc)) from None
        return self._parsed

    @property
    def body(self) -> Any:
        return self.parsed()[2]

    @property
    def decoded(self) -> Any:
        """The body if a stage decoded it already, else None (never decodes)."""
        return None if self._parsed is None else self._parsed[2]

    def replace(self, data: bytes) -> None:
        """A stage changed the frame (an operator's filter): later stages see the new one."""
        self.data = data
        self._head = None
        self._parsed = None


class Next:
    """A stage's answer: not mine to finish, go on to the next stage."""


NEXT = Next()
Outcome = bytes | None | Next
"""A request stage's result: the frame to forward, ``None`` (answered or held here), or
``NEXT``."""
