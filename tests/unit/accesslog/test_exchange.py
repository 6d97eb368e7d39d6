"""Exchanges: what a request/response pair was, read from the frames without decoding."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.accesslog.exchange import begin, complete
from gateway.accesslog.pending import Queued, entry_of
from gateway.accesslog.records import REQUEST_FIELDS, Resources
from gateway.accesslog.writer import AccessLog
from gateway.identity import ClientIdentity
from gateway.observability import ConnectionObserver, GatewayMetrics
from gateway.protocol.apis import METADATA, request_schema, response_schema
from gateway.protocol.codec import encode_request, encode_response
from gateway.protocol.errors import error_response
from gateway.protocol.framing import frame
from tests.unit.accesslog.test_counting import fetch_frame, produce_frame
from tests.unit.enforcement.build import from_data


def test_produce_request_then_response() -> None:
    request = produce_frame(9, [[4, 2]])
    exchange = begin(request, arrived=10.0)
    assert (exchange.api_key, exchange.api_version, exchange.correlation_id) == (0, 9, 7)
    assert exchange.client_id == "client"
    assert exchange.bytes_in == len(request)
    assert exchange.records == (4 + 1) + (2 + 1)
    reply = encode_response(0, 9, 7, error_response(response_schema(0, 9), ErrorCode.none))
    complete(exchange, reply, done=10.0025)
    assert exchange.bytes_out == len(reply)
    assert exchange.error_code == 0
    assert exchange.records == 8  # the request's count stays
    assert round(exchange.latency_ms, 3) == 2.5


def test_fetch_counts_come_from_the_response() -> None:
    request = encode_request(1, 12, 3, None, from_data(request_schema(1, 12), {}))
    exchange = begin(request)
    assert exchange.records is None and exchange.client_id is None
    complete(exchange, fetch_frame(12, [3, 4], [0, 1]))
    assert (exchange.records, exchange.error_code) == (7, 1)


def test_acks_zero_has_no_response() -> None:
    exchange = complete(begin(produce_frame(9, [[1]])), None)
    assert exchange.bytes_out == 0 and exchange.done is not None


def test_unsupported_version_answer() -> None:
    request = frame(struct.pack(">hhih", 3, 99, 5, -1))
    exchange = begin(request)
    assert (exchange.api_key, exchange.api_version, exchange.client_id) == (3, 99, None)
    complete(exchange, frame(struct.pack(">ih", 5, int(ErrorCode.unsupported_version))))
    assert exchange.error_code == int(ErrorCode.unsupported_version)


def test_a_denied_metadata_answer_has_its_error_code() -> None:
    request = from_data(request_schema(METADATA, 12), {"topics": [{"name": "secret"}]})
    exchange = begin(encode_request(METADATA, 12, 9, "c", request))
    topic = {"name": "secret", "error_code": 29, "is_internal": False, "partitions": []}
    body = from_data(response_schema(METADATA, 12), {"brokers": [], "topics": [topic]})
    complete(exchange, encode_response(METADATA, 12, 9, body))
    assert exchange.error_code == int(ErrorCode.topic_authorization_failed)


async def test_observer_records_and_counts() -> None:
    sink_entries: list[dict[str, Any]] = []

    class ListSink:
        name = "file"

        async def write(self, entries: list[Queued]) -> dict[str, int]:
            sink_entries.extend(entry_of(entry) for entry in entries)
            return {}

        async def close(self) -> None:
            pass

    access = AccessLog([ListSink()], queue_size=100)
    writer = asyncio.create_task(access.run())
    metrics = GatewayMetrics()
    identity = ClientIdentity("public", "127.0.0.1", 40000, "User:alice")
    observer = ConnectionObserver(access, metrics, "gw-1", "c1", identity)
    assert observer.opened()
    exchange = begin(produce_frame(9, [[2]]))
    exchange.decision, exchange.rule = "deny", "deny User:alice WRITE TOPIC:t0"
    exchange.resources = Resources(topics=("t0",), partitions=1)
    partition = {"index": 0, "error_code": 29, "base_offset": -1, "record_errors": []}
    denied = {"responses": [{"name": "t0", "partition_responses": [partition]}]}
    complete(exchange, encode_response(0, 9, 7, from_data(response_schema(0, 9), denied)))
    assert observer.exchange(exchange)
    assert observer.auth("failure", "authentication failed")
    assert observer.closed("client closed")
    await access.close()
    await writer
    assert [e["event"] for e in sink_entries] == ["open", "request", "auth", "close"]
    request = sink_entries[1]
    assert list(request) == list(REQUEST_FIELDS)
    assert request["decision"] == "deny" and request["error_code"] == 29
    assert request["records"] == 3 and request["topics"] == ["t0"]
    labels = {"api": "produce", "tenant": "unknown"}
    assert metrics.sample_value("kgw_denied_requests_total", labels) == 1
    assert metrics.sample_value("kgw_open_connections", {"listener": "public"}) == 0
    assert (
        metrics.sample_value(
            "kgw_authentication_failures_total", {"listener": "public", "mechanism": "none"}
        )
        == 1
    )


def test_an_idle_observer_does_nothing() -> None:
    observer = ConnectionObserver(None, None, "gw", "c1", ClientIdentity("l", "h", 1))
    assert not observer.active
    assert observer.opened() and observer.exchange(begin(produce_frame(9, [[1]])))
    resumed: list[int] = []
    observer.resume_when_ready(lambda: resumed.append(1))
    assert resumed == [1]
