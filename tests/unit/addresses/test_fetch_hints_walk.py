"""Fetch v16+ responses are walked, not decoded, to learn whether they carry leader
hints (decision 0051): without hints the broker's bytes go to the client as they are,
with them the hints are rewritten, and the access log's figures are the same as a full
decode gives either way."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

import gateway.session as session_module
from gateway.accesslog.counting import first_error_code, records_in, scan
from gateway.accesslog.topic import encode_batch
from gateway.addresses.rewrite import hints_by_walk
from gateway.addresses.topology import PublicMap
from gateway.identity import ClientIdentity
from gateway.protocol.apis import FETCH, PRODUCE, response_schema
from gateway.protocol.codec import (
    decode_response,
    encode_request,
    encode_response,
    response_body_offset,
)
from gateway.session import Fault, Session
from tests.unit.enforcement.build import from_data

IDENTITY = ClientIdentity(listener="public", host="127.0.0.1", port=5000)
HINTED = (16, 17, 18)
TOPIC = "00000000-0000-0000-0000-000000000007"
METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def fetch_response(version: int, hints: list[tuple[int, str, int]], top: int = 0) -> bytes:
    """Two partitions with records and nested tagged fields (current leader, diverging
    epoch), and the top-level leader hints ``hints``."""
    partitions = [
        {
            "partition_index": index,
            "error_code": code,
            "high_watermark": 50,
            "aborted_transactions": None,
            "current_leader": {"leader_id": 2, "leader_epoch": 4},
            "diverging_epoch": {"epoch": 3, "end_offset": 10},
            "records": b"".join(encode_batch([b"x" * 10] * n) for n in counts),
        }
        for index, code, counts in (
            (0, 0, (3, 4)),
            (1, int(ErrorCode.not_leader_or_follower), (2,)),
        )
    ]
    data: dict[str, Any] = {
        "error_code": top,
        "session_id": 9,
        "responses": [{"topic_id": TOPIC, "partitions": partitions}],
        "node_endpoints": [
            {"node_id": node, "host": host, "port": port, "rack": None}
            for node, host, port in hints
        ],
    }
    cls = response_schema(FETCH, version)
    return encode_response(FETCH, version, 11, from_data(cls, data))


def fetch_request(version: int) -> bytes:
    # The session without a policy does not decode the request: its header is enough.
    frame = bytearray(encode_request(3, 12, 11, "c", METADATA))
    struct.pack_into(">hh", frame, 4, FETCH, version)
    return bytes(frame)


def test_the_walked_versions_are_those_with_tagged_leader_hints() -> None:
    assert [v for v in range(4, 19) if hints_by_walk(FETCH, v)] == list(HINTED)
    assert not any(hints_by_walk(PRODUCE, v) for v in range(3, 13))  # small: decoded


@pytest.mark.parametrize("version", HINTED)
@pytest.mark.parametrize("hints", [[], [(2, "10.0.0.2", 9092)], [(1, "a", 1), (3, "b", 2)]])
def test_the_walk_counts_only_the_messages_own_tagged_fields(
    version: int, hints: list[tuple[int, str, int]]
) -> None:
    payload = memoryview(fetch_response(version, hints))[4:]
    offset = response_body_offset(payload, FETCH, version)
    schema = response_schema(FETCH, version)
    decoded = decode_response(payload, FETCH, version)
    summary = scan(payload, offset, schema)
    assert summary.tagged == (1 if hints else 0)  # nested ones (current leader…) not counted
    assert summary.records == records_in(decoded) == 9
    assert summary.error_code == first_error_code(decoded)
    uncounted = scan(payload, offset, schema, count=False)
    assert (uncounted.records, uncounted.error_code, uncounted.tagged) == (
        0,
        summary.error_code,
        summary.tagged,
    )


def _no_decoding(*args: object, **kwargs: object) -> None:
    raise AssertionError("a Fetch response without leader hints was decoded")


@pytest.mark.parametrize("version", HINTED)
def test_without_hints_the_brokers_bytes_go_out_undecoded(
    mapping: PublicMap, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    monkeypatch.setattr(session_module, "decode_response", _no_decoding)
    session = Session(mapping, IDENTITY, observe=True)
    raw = fetch_response(version, [], top=0)
    session.on_request(fetch_request(version))
    session.on_response(raw)
    assert session.take_ready() == [raw]
    (exchange,) = session.take_finished()
    assert exchange.records == 9
    assert exchange.error_code == int(ErrorCode.not_leader_or_follower)
    assert exchange.bytes_out == len(raw)


@pytest.mark.parametrize("observe", [True, False])
def test_hints_are_rewritten_and_logged_as_a_decode_would(
    mapping: PublicMap, observe: bool
) -> None:
    session = Session(mapping, IDENTITY, observe=observe)
    session.on_request(fetch_request(17))
    session.on_response(fetch_response(17, [(3, "10.9.9.9", 9093)]))
    (out,) = session.take_ready()
    decoded = decode_response(memoryview(out)[4:], FETCH, 17)
    assert [(e.host, e.port) for e in decoded.node_endpoints] == [("kafka.example.com", 19103)]
    assert records_in(decoded) == 9
    if observe:
        (exchange,) = session.take_finished()
        assert (exchange.records, exchange.error_code) == (9, first_error_code(decoded))
    else:
        assert session.take_finished() == []


@pytest.mark.parametrize("cut", [1, 7, 40, 200])
def test_a_truncated_response_is_the_brokers_fault(mapping: PublicMap, cut: int) -> None:
    session = Session(mapping, IDENTITY, observe=True)
    raw = fetch_response(16, [])
    session.on_request(fetch_request(16))
    short = raw[:-cut]
    with pytest.raises(Fault) as caught:
        session.on_response(struct.pack(">i", len(short) - 4) + short[4:])
    assert caught.value.side == "upstream"
