"""Produce's fast path in the access log (issue 16): the figures read from the decoded
messages the session has anyway are exactly those the frame scans give."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from gateway.accesslog.counting import produce_error_code, produce_records, scan
from gateway.accesslog.exchange import (
    begin,
    begin_parsed,
    complete,
    count_produce,
    produce_answered,
)
from gateway.accesslog.records import produce_resources, resources_of
from gateway.protocol.apis import PRODUCE, request_schema, response_schema
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_response,
    parse_request_head,
    response_body_offset,
)
from tests.unit.accesslog.test_counting import PRODUCE_VERSIONS, produce_frame
from tests.unit.enforcement.build import from_data

LAYOUTS = [[[3, None, 0], [10]], [[1]], [], [[None]], [[2, 2], [5], [0, 7, 1]]]


def _decoded(frame: bytes) -> object:
    payload = memoryview(frame)[4:]
    return decode_request(parse_request_head(payload), payload)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_records_from_the_body_are_the_scanned_count(
    version: int, layout: list[list[int | None]]
) -> None:
    frame = produce_frame(version, layout)
    scanned = begin(frame).records
    assert scanned is not None
    assert produce_records(_decoded(frame)) == scanned
    deferred = begin(frame, count=False)
    assert deferred.records is None
    count_produce(deferred, frame, _decoded(frame))
    assert deferred.records == scanned
    by_frame = begin(frame, count=False)
    count_produce(by_frame, frame)  # no body: the frame is scanned
    assert by_frame.records == scanned


def test_begin_parsed_hands_back_the_header_it_read() -> None:
    frame = produce_frame(9, [[1]])
    exchange, head = begin_parsed(frame)
    assert head == parse_request_head(memoryview(frame)[4:])
    assert exchange.records == 2
    _, none = begin_parsed(frame[:4] + b"\x00\x00\x00\x63" + frame[8:])  # version 99
    assert none is None


def _produce_response(version: int, codes: list[list[int]]) -> bytes:
    cls = response_schema(PRODUCE, version)
    key = "topic_id" if version >= 13 else "name"
    topics = [
        {
            key: f"00000000-0000-0000-0000-00000000000{t}" if version >= 13 else f"t{t}",
            "partition_responses": [
                {"index": i, "error_code": code, "base_offset": 0}
                for i, code in enumerate(partitions)
            ],
        }
        for t, partitions in enumerate(codes)
    ]
    return encode_response(PRODUCE, version, 7, from_data(cls, {"responses": topics}))


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize(
    "codes", [[[0, 0], [0]], [[0, 6], [29]], [[0], [3, 0]], [], [[int(ErrorCode.none)]]]
)
def test_error_code_from_the_decoded_response_is_the_scanned_one(
    version: int, codes: list[list[int]]
) -> None:
    reply = _produce_response(version, codes)
    payload = memoryview(reply)[4:]
    offset = response_body_offset(payload, PRODUCE, version)
    scanned = scan(payload, offset, response_schema(PRODUCE, version)).error_code
    response = decode_response(payload, PRODUCE, version)
    assert produce_error_code(response) == scanned
    exchange = begin(produce_frame(version, [[1]]))
    produce_answered(exchange, response)
    complete(exchange, reply)
    assert exchange.error_code == scanned
    plain = complete(begin(produce_frame(version, [[1]])), reply)  # scanned
    assert plain.error_code == scanned and plain.bytes_out == exchange.bytes_out


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("txn", [None, "", "tx-1"])
def test_produce_resources_are_the_generic_walk(version: int, txn: str | None) -> None:
    key = "topic_id" if version >= 13 else "name"

    def topic(name: str, partitions: int) -> dict[str, object]:
        value = f"00000000-0000-0000-0000-0000000000{name}" if version >= 13 else name
        return {key: value, "partition_data": [{"index": i} for i in range(partitions)]}

    for topics in ([], [topic("11", 2), topic("12", 1), topic("11", 3)], [topic("", 2)]):
        if version >= 13 and topics and topics[0][key] == "00000000-0000-0000-0000-0000000000":
            continue  # not a uuid
        data = {"transactional_id": txn, "acks": -1, "timeout": 1000, "topic_data": topics}
        request = from_data(request_schema(PRODUCE, version), data)
        assert produce_resources(request) == resources_of(request)
