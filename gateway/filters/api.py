"""The public filter API: what an operator's filter implements and what it is given.

A filter is an object with ``name``, ``api_keys`` (the Kafka API keys it wants;
``None``: all of them) and two synchronous hooks (no I/O on the data path);
``BaseFilter`` gives both hooks as no-ops, so a subclass writes only the one it needs:

* ``on_request(call: RequestCall)`` sees a client's request before the gateway
  authorizes it, so whatever it changes is what authorization judges and what the
  broker receives. It may read ``call.body`` (decoded on first use, a kio dataclass),
  ``call.replace(body)`` it, or ``call.reject(code, message)`` it: the client gets
  the error on every entry of its request, the broker never sees it.
* ``on_response(call: ResponseCall)`` sees the broker's answer after authorization
  has merged its own denials in and before broker addresses are rewritten; it may
  ``call.replace(body)`` it. ``call.correlation_id`` is its request's, so a filter can
  pair the two through ``call.context.state``. A response is decoded only for keys some
  filter has its own ``on_response`` for.

Frames of API keys no filter wants pass through undecoded. A filter that raises closes
only its connection (logged with the filter's name, never the request's content);
SASL and ApiVersions never reach filters. Filters are built once at start-up from the
configuration (``loader``) and shared by every connection: keep per-connection state
in ``call.context.state``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..protocol import apis

if TYPE_CHECKING:
    from kio.static.protocol import Entity

    from ..identity import ClientIdentity

__all__ = ["BaseFilter", "Filter", "FilterContext", "FilterError", "RequestCall", "ResponseCall"]


class FilterError(Exception):
    """A filter cannot be loaded or configured; the message says which and why."""


class FilterContext:
    """The connection a call belongs to, as a filter sees it: who the client is (after
    authentication), a logger, and ``state``, this filter's scratch space for this
    connection."""

    __slots__ = ("_identity", "log", "state")

    def __init__(self, identity: ClientIdentity, log: logging.Logger) -> None:
        self._identity = identity
        self.log = log  # ``kgw.filters.<name>``: a filter's own log lines go here
        self.state: dict[str, Any] = {}

    @property
    def principal(self) -> str:
        return self._identity.principal

    @property
    def tenant(self) -> str | None:
        return self._identity.tenant

    @property
    def client_host(self) -> str:
        return self._identity.host

    @property
    def listener(self) -> str:
        return self._identity.listener


class _Call:
    """What both hooks share: the API, the connection, the body decoded on demand."""

    __slots__ = (
        "_body", "_decode", "_replaced", "api_key", "api_version", "context", "correlation_id",
        "rejection", "waiting",
    )  # fmt: skip

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        context: FilterContext,
        decode: Any,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id  # the same on a request and its response
        self.context = context
        self._decode = decode
        self._body: Any = None
        self._replaced = False
        self.rejection: tuple[int, str | None] | None = None  # ``RequestCall.reject``
        self.waiting: Callable[[], Awaitable[Any]] | None = None  # ``RequestCall.wait_for``

    @property
    def api_name(self) -> str:
        return apis.api_name(self.api_key)

    @property
    def body(self) -> Any:
        """The message as a kio dataclass (decoded on first use, then kept)."""
        if self._body is None:
            self._body = self._decode()
        return self._body

    @property
    def decoded(self) -> Any:
        """The body if a hook decoded or replaced it, else ``None`` (for the chain)."""
        return self._body

    @property
    def replaced(self) -> bool:
        return self._replaced

    def replace(self, body: Entity) -> None:
        """Send ``body`` on instead (same message type and version, e.g. from
        ``dataclasses.replace(call.body, ...)``)."""
        if type(body) is not type(self.body):
            raise TypeError(
                f"{self.api_name} v{self.api_version}: expected {type(self.body).__name__},"
                f" got {type(body).__name__}"
            )
        self._body = body
        self._replaced = True

    def evolve(self, **changes: Any) -> None:
        """``replace`` with some fields changed: ``call.evolve(topics=...)``."""
        self.replace(dataclasses.replace(self.body, **changes))


class RequestCall(_Call):
    """One client request on its way to the broker."""

    __slots__ = ()

    def reject(self, error_code: int, message: str | None = None) -> None:
        """Answer the client with ``error_code`` (a Kafka error code) on every entry of the
        request, and ``message`` where the response has an error message; the broker
        never sees the request. Filters after this one are not called."""
        self.rejection = (int(error_code), message)

    def wait_for(self, run: Callable[[], Awaitable[Any]]) -> None:
        """Not ready: the gateway awaits ``run()`` off the data path (the connection's
        later requests wait behind this one, other connections go on), then runs the
        request hooks again, from the first filter, on the request as the client sent
        it. For work a hook cannot do without I/O (a key manager call); the hook keeps
        what it learnt (e.g. in a cache) so that its next run can finish. Filters after
        this one are not called; whatever this call changed is dropped."""
        self.waiting = run


class ResponseCall(_Call):
    """One broker response on its way to the client."""

    __slots__ = ()


@runtime_checkable
class Filter(Protocol):
    """What an operator's filter looks like (subclass ``BaseFilter`` or just match it)."""

    name: str

    @property
    def api_keys(self) -> frozenset[int] | None: ...

    def on_request(self, call: RequestCall) -> None: ...

    def on_response(self, call: ResponseCall) -> None: ...


class BaseFilter:
    """A convenient base: a name, every API key, and hooks that do nothing."""

    name: str = ""
    api_keys: frozenset[int] | None = None

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    def on_request(self, call: RequestCall) -> None:
        return None

    def on_response(self, call: ResponseCall) -> None:
        return None
