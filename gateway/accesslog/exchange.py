"""What the session learns about one request/response pair, for its access-log record.

Pure and cheap: ``begin`` reads the request header (and, for Produce, counts the
records by scanning the frame, see ``counting``); ``complete`` takes the frame
that actually goes to the client and reads its error code (and, for Fetch, its
record count) the same way. Authorization fills ``decision``, ``rule`` and
``resources`` when it decodes the request anyway; quotas fill ``throttle_ms``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..protocol import apis
from ..protocol.codec import (
    ProtocolError,
    parse_request_head,
    peek_request,
    response_body_offset,
)
from .counting import scan
from .records import NO_RESOURCES, Decision, Resources


@dataclass(slots=True)
class Exchange:
    """One request and, once ``complete`` ran, its response."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    bytes_in: int
    arrived: float  # time.monotonic() when the request frame was read
    records: int | None = None
    decision: Decision = "none"
    rule: str | None = None
    resources: Resources = NO_RESOURCES
    throttle_ms: int = 0
    bytes_out: int = 0
    error_code: int = 0
    done: float | None = None
    namespace: str | None = None  # a namespaced tenant's prefix (gateway/namespaces)

    @property
    def latency_ms(self) -> float:
        end = self.done if self.done is not None else time.monotonic()
        return (end - self.arrived) * 1000.0


def begin(frame: bytes, arrived: float | None = None) -> Exchange:
    """An exchange for a size-prefixed request ``frame`` (its header must parse).

    Raises ``ProtocolError`` only for a frame shorter than a header; an unknown API
    key or version, or a header that does not parse, leaves ``client_id`` unknown.
    """
    payload = memoryview(frame)[4:]
    when = time.monotonic() if arrived is None else arrived
    key, version, correlation_id = peek_request(payload)
    if version not in apis.decodable_versions(key):
        return Exchange(key, version, correlation_id, None, len(frame), when)
    try:
        head = parse_request_head(payload)
    except ProtocolError:
        return Exchange(key, version, correlation_id, None, len(frame), when)
    exchange = Exchange(
        head.api_key, head.api_version, head.correlation_id, head.client_id, len(frame), when
    )
    if key == apis.PRODUCE:
        try:
            schema = apis.request_schema(head.api_key, head.api_version)
            exchange.records = scan(payload, head.body_offset, schema).records
        except ProtocolError:
            exchange.records = None
    return exchange


def complete(exchange: Exchange, frame: bytes | None, done: float | None = None) -> Exchange:
    """Record the response ``frame`` sent to the client (None: Produce acks=0, no response)."""
    exchange.done = time.monotonic() if done is None else done
    if frame is None:
        return exchange
    exchange.bytes_out = len(frame)
    key, version = exchange.api_key, exchange.api_version
    if version not in apis.decodable_versions(key):
        if len(frame) >= 10:  # the minimal UNSUPPORTED_VERSION answer: correlation id, error
            exchange.error_code = int.from_bytes(frame[8:10], "big", signed=True)
        return exchange
    payload = memoryview(frame)[4:]
    try:
        offset = response_body_offset(payload, key, version)
        summary = scan(payload, offset, apis.response_schema(key, version))
    except ProtocolError:
        return exchange  # the client got it anyway; the record just lacks the figures
    exchange.error_code = summary.error_code
    if key == apis.FETCH:
        exchange.records = summary.records
    return exchange
