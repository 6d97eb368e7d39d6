"""One client connection's link to the access log and the metrics.

The network layer keeps one ``ConnectionObserver`` per ``ClientConnection`` and
calls it at each connection event and for each finished exchange; it queues the
schema-v1 record (``AccessLog.record``; a request's unbuilt, as a ``PendingRequest`` the
sink builds with its batch) and updates the metrics. Every
method returns what ``AccessLog.record`` returned: False means ``on_full: block``
wants this connection to stop reading until ``resume_when_ready`` calls back.
With neither an access log nor metrics configured it does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..accesslog.exchange import Exchange
from ..accesslog.pending import PendingRequest
from ..accesslog.records import ConnectionEvent, Outcome, connection_record, who
from ..accesslog.writer import AccessLog
from ..identity import ClientIdentity
from .metrics import GatewayMetrics


class ConnectionObserver:
    """Records and metrics for the connection ``conn`` whose identity is ``identity``."""

    __slots__ = ("access_log", "conn", "identity", "instance", "metrics")

    def __init__(
        self,
        access_log: AccessLog | None,
        metrics: GatewayMetrics | None,
        instance: str,
        conn: str,
        identity: ClientIdentity,
    ) -> None:
        self.access_log = access_log
        self.metrics = metrics
        self.instance = instance
        self.conn = conn
        self.identity = identity

    @property
    def active(self) -> bool:
        """Whether exchanges are worth tracking at all."""
        return self.access_log is not None or self.metrics is not None

    def _connection(
        self, event: ConnectionEvent, outcome: Outcome | None = None, reason: str | None = None
    ) -> bool:
        if self.access_log is None:
            return True
        entry = connection_record(
            self.instance, self.conn, self.identity, event, outcome=outcome, reason=reason
        )
        return self.access_log.record(entry)

    def opened(self) -> bool:
        """Call once the peer address is in the identity (``connection_made``)."""
        if self.metrics is not None:
            self.metrics.connection_opened(self.identity.listener)
        return self._connection("open")

    def tls(self, outcome: Outcome, reason: str | None = None) -> bool:
        """After the TLS handshake (the identity holds version, cipher, subject)."""
        if outcome == "failure" and self.metrics is not None:
            self.metrics.auth_failed(self.identity.listener, "TLS")
        return self._connection("tls", outcome, reason)

    def auth(self, outcome: Outcome, reason: str | None = None) -> bool:
        """After SASL authentication (the identity holds principal, tenant, mechanism)."""
        if outcome == "failure" and self.metrics is not None:
            mechanism = getattr(self.identity, "sasl_mechanism", None)
            self.metrics.auth_failed(self.identity.listener, mechanism)
        return self._connection("auth", outcome, reason)

    def closed(self, reason: str) -> bool:
        """Call exactly once per ``opened`` (``connection_lost``/``close``)."""
        if self.metrics is not None:
            self.metrics.connection_closed(self.identity.listener)
        return self._connection("close", reason=reason)

    def exchange(self, exchange: Exchange, now: float | None = None) -> bool:
        """A request whose response left (or a Produce acks=0 that was forwarded).

        The access log gets it as a ``PendingRequest``: its record is built with the rest
        of its batch (``accesslog.pending``), the sender's fields as they are now."""
        if exchange.done is None:
            exchange.done = time.monotonic()
        if self.metrics is not None:
            self.metrics.observe_exchange(exchange, self.identity.tenant)
        if self.access_log is None:
            return True
        sender = who(self.instance, self.conn, self.identity)
        pending = PendingRequest(sender, exchange, time.time() if now is None else now)
        return self.access_log.record(pending)

    def resume_when_ready(self, resume: Callable[[], None]) -> None:
        """``block`` mode: call ``resume`` once the access log has room again."""
        if self.access_log is not None:
            self.access_log.when_ready(resume)
        else:
            resume()
