"""Record counts and error codes read from raw frames agree with kio's full decoding."""

from __future__ import annotations

import dataclasses
import struct
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from gateway.accesslog.counting import (
    batch_record_count,
    first_error_code,
    records_in,
    scan,
)
from gateway.accesslog.topic import encode_batch
from gateway.protocol.apis import FETCH, PRODUCE, gateway_apis, request_schema, response_schema
from gateway.protocol.codec import (
    ProtocolError,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
    parse_request_head,
    response_body_offset,
)
from gateway.protocol.errors import build_entity
from tests.unit.enforcement.build import from_data


def batches(*counts: int) -> bytes:
    return b"".join(encode_batch([b"v%d" % i for i in range(n)]) for n in counts if n)


def legacy_message(value: bytes) -> bytes:
    body = struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", len(value))
    body += value
    return struct.pack(">qii", 0, 4 + len(body), 0) + body  # offset, size, crc (unchecked)


def test_counts_every_complete_batch() -> None:
    assert batch_record_count(b"") == 0
    assert batch_record_count(batches(3)) == 3
    assert batch_record_count(batches(1, 5, 2)) == 8


def test_a_trailing_partial_batch_is_not_counted() -> None:
    data = batches(4, 6)
    assert batch_record_count(data[:-1]) == 4
    assert batch_record_count(data[:-100]) == 4
    assert batch_record_count(data[: len(batches(4)) + 10]) == 4


def test_legacy_messages_count_one_each() -> None:
    assert batch_record_count(legacy_message(b"a") + legacy_message(b"bc")) == 2


def test_a_batch_shorter_than_its_header_is_refused() -> None:
    bogus = struct.pack(">qib", 0, 20, 0) + b"\x00" * 3 + b"\x02" + b"\x00" * 16
    with pytest.raises(ProtocolError):
        batch_record_count(bogus)


# -- Produce requests, every version ------------------------------------------------


def _topic_key(entity_cls: type[Any], array: str) -> str:
    """``name``/``topic`` or ``topic_id``: how this version names a topic."""
    hints = typing.get_type_hints(entity_cls)
    (element,) = [a for a in typing.get_args(hints[array]) if a is not Ellipsis]
    names = {f.name for f in dataclasses.fields(element)}
    return next(k for k in ("name", "topic", "topic_id") if k in names)


def produce_frame(version: int, layout: list[list[int | None]]) -> bytes:
    cls = request_schema(PRODUCE, version)
    key = _topic_key(cls, "topic_data")
    topics = []
    for t, partitions in enumerate(layout):
        name: str = f"00000000-0000-0000-0000-00000000000{t}" if key == "topic_id" else f"t{t}"
        data = [
            {"index": i, "records": None if n is None else batches(n, 1)}
            for i, n in enumerate(partitions)
        ]
        topics.append({key: name, "partition_data": data})
    request = from_data(cls, {"acks": -1, "timeout": 1000, "topic_data": topics})
    return encode_request(PRODUCE, version, 7, "client", request)


PRODUCE_VERSIONS = sorted(range(gateway_apis()[PRODUCE].min_version, 14))


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_request_counts_match_kio(version: int) -> None:
    frame = produce_frame(version, [[3, None, 0], [10]])
    payload = memoryview(frame)[4:]
    head = parse_request_head(payload)
    summary = scan(payload, head.body_offset, request_schema(PRODUCE, version))
    expected = (3 + 1) + (0 + 1) + (10 + 1)
    assert summary.records == expected
    assert records_in(decode_request(head, payload)) == expected


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(PRODUCE_VERSIONS),
    layout=st.lists(st.lists(st.one_of(st.none(), st.integers(0, 20)), max_size=4), max_size=3),
)
def test_produce_counts_for_any_layout(version: int, layout: list[list[int | None]]) -> None:
    payload = memoryview(produce_frame(version, layout))[4:]
    head = parse_request_head(payload)
    expected = sum(n + 1 for partitions in layout for n in partitions if n is not None)
    assert scan(payload, head.body_offset, request_schema(PRODUCE, version)).records == expected


# -- Fetch responses, every version ---------------------------------------------------


def fetch_frame(version: int, counts: list[int], errors: list[int], top: int = 0) -> bytes:
    cls = response_schema(FETCH, version)
    key = _topic_key(cls, "responses")
    topic = "00000000-0000-0000-0000-000000000001" if key == "topic_id" else "t"
    partitions = [
        {
            "partition_index": i,
            "error_code": errors[i],
            "high_watermark": 100,
            "aborted_transactions": [{"producer_id": 9, "first_offset": 1}],
            "records": batches(n) + batches(5)[:-3],  # with a partial trailing batch
        }
        for i, n in enumerate(counts)
    ]
    data: dict[str, Any] = {"responses": [{key: topic, "partitions": partitions}]}
    if any(f.name == "error_code" for f in dataclasses.fields(cls)):
        data["error_code"] = top
    return encode_response(FETCH, version, 7, from_data(cls, data))


FETCH_VERSIONS = sorted(range(gateway_apis()[FETCH].min_version, 19))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_response_counts_and_error_match_kio(version: int) -> None:
    payload = memoryview(fetch_frame(version, [2, 0, 7], [0, 6, 3]))[4:]
    offset = response_body_offset(payload, FETCH, version)
    summary = scan(payload, offset, response_schema(FETCH, version))
    decoded = decode_response(payload, FETCH, version)
    assert summary.records == records_in(decoded) == 9
    assert summary.error_code == first_error_code(decoded) == 6


def test_fetch_top_level_error_wins() -> None:
    payload = memoryview(fetch_frame(12, [1], [6], top=int(ErrorCode.unknown_server_error)))[4:]
    summary = scan(payload, response_body_offset(payload, FETCH, 12), response_schema(FETCH, 12))
    assert summary.error_code == int(ErrorCode.unknown_server_error)


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000), version=st.sampled_from(FETCH_VERSIONS))
def test_truncated_frames_raise_protocol_error_only(cut: int, version: int) -> None:
    payload = bytes(fetch_frame(version, [2, 3], [0, 0]))[4:]
    cut %= len(payload)
    offset = response_body_offset(payload, FETCH, version)
    if cut <= offset:
        return
    with pytest.raises(ProtocolError):
        scan(payload[:cut], offset, response_schema(FETCH, version))


# -- any response: the error code without decoding ------------------------------------


def _all_responses() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, spec in gateway_apis().items()
        for version in range(spec.min_version, spec.max_version + 1)
    ]


@pytest.mark.parametrize(("key", "version"), _all_responses())
def test_scan_finds_the_error_code_of_any_response(key: int, version: int) -> None:
    cls = response_schema(key, version)
    entity = build_entity(cls, ErrorCode.topic_authorization_failed)
    body = encode_body(entity)
    summary = scan(body, 0, cls)
    assert summary.error_code == first_error_code(entity)
    assert summary.records == 0
