"""Quota charges for one connection, with Kafka's throttle semantics (KIP-219). No I/O.

Requests are never refused for a byte or request quota: the response carries
``throttle_time_ms`` and the network layer stops reading the connection for
that long. A Fetch that is already over its quota is answered empty, with the
throttle, without going to a broker.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING, Any

from ..identity import ClientIdentity
from ..protocol import apis
from .booking import Booking
from .model import QuotaKind, Subject

if TYPE_CHECKING:
    from .engine import QuotaEngine


class Throttle:
    def __init__(self, engine: QuotaEngine, identity: ClientIdentity) -> None:
        self.engine = engine
        self.identity = identity
        self._subject: Subject | None = None
        self._booking = Booking()  # the buckets its requests are charged to (engine's memo)
        self._until = 0.0  # the end of the longest throttle given so far (engine clock)

    def subject(self) -> Subject:
        """Built again only when authentication changed who the connection is."""
        identity, subject = self.identity, self._subject
        if (
            subject is None
            or subject.principal != identity.principal
            or subject.api_key_id != identity.api_key_id
            or subject.tenant != identity.tenant
        ):
            subject = self._subject = Subject(
                identity.principal, identity.api_key_id, identity.tenant, identity.host
            )
        return subject

    def fetch_blocked_ms(self) -> float:
        """Throttle of a Fetch that is over its byte quota already (answer it empty)."""
        return self._given(self.engine.throttle_for(self.subject(), QuotaKind.FETCH_BYTES))

    def fetch_most_bytes(self) -> int | None:
        """The most one Fetch may ask for under the connection's fetch quota: what one
        throttle can pay for (the burst and ``max_throttle_ms`` of the rate). Kafka caps
        a fetch's ``max_bytes`` at its quota window the same way, else one response could
        carry many times the rate. None: no fetch quota."""
        try:
            limit = self.engine.limit(self.subject(), QuotaKind.FETCH_BYTES)
        except Exception:  # the engine logs and counts its own failures
            return None
        if limit is None:
            return None
        return max(1, int(limit.burst + limit.rate * self.engine.cfg.max_throttle_ms / 1000))

    def on_request(self, api_key: int, size: int) -> float:
        """Charge a forwarded request; the throttle in ms (0: none)."""
        produced = size if api_key == apis.PRODUCE else None
        ms = self.engine.charge_request(self.subject(), produced, self._booking)
        return self._given(ms) if ms > 0 else ms

    def left_ms(self) -> float:
        """What is left now of the throttles this connection was given (its mute runs
        from the charge: the response must not restart it, nor end it early)."""
        return max(0.0, (self._until - self.engine.now()) * 1000.0)

    def _given(self, ms: float) -> float:
        if ms > 0:
            self._until = max(self._until, self.engine.now() + ms / 1000.0)
        return ms

    def on_fetch_response(self, size: int) -> float:
        return self._given(self.engine.charge(self.subject(), QuotaKind.FETCH_BYTES, size))


def with_throttle_time(response: Any, ms: float) -> Any:
    """KIP-219: ``response`` telling the client it is throttled for ``ms`` (at least what
    the broker said); unchanged when its version has no throttle time."""
    current = getattr(response, "throttle_time", None)
    if not isinstance(current, datetime.timedelta):
        return response
    wanted = datetime.timedelta(milliseconds=ms)
    return dataclasses.replace(response, throttle_time=max(current, wanted))
