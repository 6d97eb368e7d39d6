"""What the session learns about one request/response pair, for its access-log record.

Pure and cheap: ``begin`` reads the request header (and, for Produce, counts the
records by scanning the frame, see ``counting``); ``complete`` takes the frame
that actually goes to the client and reads its error code (and, for Fetch, its
record count) the same way. Authorization fills ``decision``, ``rule`` and
``resources`` when it decodes the request anyway; quotas fill ``throttle_ms``.

Produce is the one API whose every request is logged at a high rate, so the
session may skip both scans when it has the decoded message anyway: ``begin(...,
count=False)`` then ``count_produce`` with the decoded request (or the frame),
and ``produce_answered`` with the decoded response that becomes the client's
frame. A Fetch response the session walked already (to look for leader hints) and
forwards unchanged hands its figures over with ``response_scanned``. The figures are
the same either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..protocol import apis
from ..protocol.codec import (
    ProtocolError,
    RequestHead,
    parse_request_head,
    peek_request,
    response_body_offset,
)
from ..protocol.framing import Frame
from .counting import Summary, produce_error_code, produce_records, scan
from .records import NO_RESOURCES, Decision, Resources

NETWORK_EXCEPTION = 13  # Kafka's error for a connection closed before the response


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
    response_error: int | None = None  # read already (decoded Produce, walked Fetch)

    @property
    def latency_ms(self) -> float:
        end = self.done if self.done is not None else time.monotonic()
        return (end - self.arrived) * 1000.0


def begin(frame: bytes, arrived: float | None = None, count: bool = True) -> Exchange:
    """An exchange for a size-prefixed request ``frame`` (its header must parse).

    Raises ``ProtocolError`` only for a frame shorter than a header; an unknown API
    key or version, or a header that does not parse, leaves ``client_id`` unknown.
    ``count=False``: a Produce request's records are left for ``count_produce``.
    """
    return begin_parsed(frame, arrived, count)[0]


def begin_parsed(
    frame: bytes,
    arrived: float | None = None,
    count: bool = True,
    prefix: tuple[int, int, int] | None = None,
) -> tuple[Exchange, RequestHead | None]:
    """``begin``, and the request header it parsed (None: it did not parse), so that
    the caller need not parse it again. ``prefix``: what ``peek_request`` read from the
    frame already (the session peeks first)."""
    payload = memoryview(frame)[4:]
    when = time.monotonic() if arrived is None else arrived
    if prefix is None:
        prefix = peek_request(payload)
    key, version, correlation_id = prefix
    if version not in apis.decodable_versions(key):
        return Exchange(key, version, correlation_id, None, len(frame), when), None
    try:
        head = parse_request_head(payload, prefix)
    except ProtocolError:
        return Exchange(key, version, correlation_id, None, len(frame), when), None
    exchange = Exchange(
        head.api_key, head.api_version, head.correlation_id, head.client_id, len(frame), when
    )
    if key == apis.PRODUCE and count:
        exchange.records = _scan_produce(payload, head.body_offset, head.api_version)
    return exchange, head


def _scan_produce(payload: memoryview, body_offset: int, version: int) -> int | None:
    try:
        schema = apis.request_schema(apis.PRODUCE, version)
        return scan(payload, body_offset, schema).records
    except ProtocolError:
        return None


def count_produce(exchange: Exchange, frame: bytes, body: object | None = None) -> None:
    """The records of the Produce request ``frame`` (``begin(..., count=False)``), from
    its decoded ``body`` when a stage decoded it, else by scanning the frame."""
    if exchange.api_version not in apis.decodable_versions(apis.PRODUCE):
        return
    if body is not None:
        try:
            exchange.records = produce_records(body)
        except ProtocolError:  # as the scan: the record just lacks the count
            exchange.records = None
        return
    payload = memoryview(frame)[4:]
    try:
        offset = parse_request_head(payload).body_offset
    except ProtocolError:
        return
    exchange.records = _scan_produce(payload, offset, exchange.api_version)


def produce_answered(exchange: Exchange, response: object) -> None:
    """The decoded Produce response that is (or is encoded into) the client's frame:
    ``complete`` takes its error code from here instead of scanning the frame."""
    exchange.response_error = produce_error_code(response)


def response_scanned(exchange: Exchange, summary: Summary) -> None:
    """What ``scan`` (counting records) read of the very frame the client gets:
    ``complete`` does not walk it again."""
    exchange.response_error = summary.error_code
    if exchange.api_key == apis.FETCH:
        exchange.records = summary.records


def abandoned(exchange: Exchange, done: float | None = None) -> Exchange:
    """A request whose response never left: the connection closed first (the client
    went, or the gateway closed it). Its error is NETWORK_EXCEPTION, what a client's
    library reports then; a request forwarded already may have been carried out by the
    broker all the same. A decision and resources found already are kept."""
    exchange.done = time.monotonic() if done is None else done
    exchange.bytes_out = 0
    exchange.error_code = NETWORK_EXCEPTION
    return exchange


def refused_unanswered(exchange: Exchange, error_code: int) -> Exchange:
    """A request refused that gets no answer (Produce with acks=0: the connection is
    closed instead, as Kafka does): its record carries the error it was refused with."""
    complete(exchange, None)
    exchange.error_code = error_code
    return exchange


def complete(exchange: Exchange, frame: Frame | None, done: float | None = None) -> Exchange:
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
    if exchange.response_error is not None:
        exchange.error_code = exchange.response_error
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
