"""Scripted exchanges with the sans-IO session: no sockets."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v17.response import FetchResponse, NodeEndpoint
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseBroker
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32

from gateway.addresses.topology import PublicMap
from gateway.identity import ClientIdentity
from gateway.protocol.codec import decode_response, encode_request, encode_response
from gateway.session import Fault, Session

IDENTITY = ClientIdentity(listener="public", host="127.0.0.1", port=5000)
METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def produce(acks: int) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=5), topic_data=()
    )


def metadata_response(*brokers: tuple[int, str, int]) -> MetadataResponse:
    return MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=tuple(
            MetadataResponseBroker(node_id=BrokerId(n), host=h, port=i32(p)) for n, h, p in brokers
        ),
        topics=(),
    )


def correlation(frame: bytes) -> int:
    return int(struct.unpack_from(">i", frame, 4)[0])


def test_responses_leave_in_request_order_behind_inflight(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    assert session.on_request(encode_request(3, 12, 1, "c", METADATA)) is not None
    # Request 2 uses an API the gateway does not advertise: answered locally...
    local = encode_request(3, 12, 2, "c", METADATA)
    unknown = bytearray(local)
    struct.pack_into(">h", unknown, 4, 57)  # UpdateFeatures: known to kio, never advertised
    assert session.on_request(bytes(unknown)) is None
    # ...but it must wait behind response 1.
    assert session.take_ready() == []
    session.on_response(encode_response(3, 12, 1, metadata_response()))
    ready = session.take_ready()
    assert [correlation(f) for f in ready] == [1, 2]


def test_acks_zero_produce_gets_no_slot(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    assert session.on_request(encode_request(0, 9, 1, "c", produce(0))) is not None
    assert session.inflight == 0
    assert session.on_request(encode_request(0, 9, 2, "c", produce(1))) is not None
    assert session.inflight == 1
    session.on_response(
        encode_response(0, 9, 2, ProduceResponse(responses=(), throttle_time=datetime.timedelta(0)))
    )
    assert [correlation(f) for f in session.take_ready()] == [2]


def test_metadata_brokers_are_rewritten_and_learned(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    session.on_request(encode_request(3, 12, 7, "c", METADATA))
    session.on_response(
        encode_response(3, 12, 7, metadata_response((1, "10.0.0.1", 9092), (2, "10.0.0.2", 9092)))
    )
    (out,) = session.take_ready()
    decoded = decode_response(memoryview(out)[4:], 3, 12)
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [
        (1, "kafka.example.com", 19101),
        (2, "kafka.example.com", 19102),
    ]
    assert mapping.topology.address(2) == ("10.0.0.2", 9092)


def test_fetch_without_node_endpoints_is_forwarded_byte_for_byte(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    response = FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(),
    )
    raw = encode_response(1, 17, 3, response)
    fetch_req = bytearray(encode_request(3, 12, 3, "c", METADATA))
    struct.pack_into(">hh", fetch_req, 4, 1, 17)
    session.on_request(bytes(fetch_req))
    session.on_response(raw)
    assert session.take_ready() == [raw]


def test_fetch_node_endpoints_are_rewritten(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    endpoint = NodeEndpoint(node_id=BrokerId(3), host="10.9.9.9", port=i32(9093))
    response = FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(),
        node_endpoints=(endpoint,),
    )
    fetch_req = bytearray(encode_request(3, 12, 4, "c", METADATA))
    struct.pack_into(">hh", fetch_req, 4, 1, 17)
    session.on_request(bytes(fetch_req))
    session.on_response(encode_response(1, 17, 4, response))
    (out,) = session.take_ready()
    decoded = decode_response(memoryview(out)[4:], 1, 17)
    assert [(e.host, e.port) for e in decoded.node_endpoints] == [("kafka.example.com", 19103)]


def test_unknown_api_key_gets_unsupported_version_then_close(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    data = bytearray(encode_request(3, 12, 5, "c", METADATA))
    struct.pack_into(">h", data, 4, 999)
    assert session.on_request(bytes(data)) is None
    (out,) = session.take_ready()
    assert struct.unpack(">iih", out) == (6, 5, ErrorCode.unsupported_version)
    assert session.close_after_flush is not None


def test_unadvertised_version_answered_in_clients_version(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    data = bytearray(encode_request(3, 12, 8, "c", METADATA))
    struct.pack_into(">h", data, 4, 55)  # DescribeQuorum v... (never advertised)
    struct.pack_into(">h", data, 6, 1)
    assert session.on_request(bytes(data)) is None
    (out,) = session.take_ready()
    assert decode_response(memoryview(out)[4:], 55, 1).error_code == ErrorCode.unsupported_version
    assert session.close_after_flush is None


def test_api_versions_are_intersected(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    session.on_request(
        encode_request(
            18, 3, 1, "c", ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    )
    broker = ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(
            ApiVersion(
                api_key=i16(0), min_version=i16(0), max_version=i16(99)
            ),  # Produce, beyond kio
            ApiVersion(
                api_key=i16(3), min_version=i16(0), max_version=i16(5)
            ),  # Metadata, older cluster
            ApiVersion(
                api_key=i16(52), min_version=i16(0), max_version=i16(1)
            ),  # Vote: never advertised
        ),
        throttle_time=datetime.timedelta(0),
    )
    session.on_response(encode_response(18, 3, 1, broker))
    (out,) = session.take_ready()
    decoded = decode_response(memoryview(out)[4:], 18, 3)
    assert {(a.api_key, a.min_version, a.max_version) for a in decoded.api_keys} == {
        (0, 3, 13),
        (3, 0, 5),
    }


def test_api_versions_newer_than_gateway_answered_locally_v0(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    data = bytearray(
        encode_request(
            18,
            3,
            11,
            "c",
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
    )
    struct.pack_into(">h", data, 6, 9)
    assert session.on_request(bytes(data)) is None
    (out,) = session.take_ready()
    error_code, count = struct.unpack_from(">hi", out, 8)
    assert error_code == ErrorCode.unsupported_version and count == 1


def test_mismatched_correlation_id_is_upstreams_fault(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    session.on_request(encode_request(3, 12, 1, "c", METADATA))
    with pytest.raises(Fault) as info:
        session.on_response(encode_response(3, 12, 2, metadata_response()))
    assert info.value.side == "upstream"


def test_unsolicited_response_is_upstreams_fault(mapping: PublicMap) -> None:
    with pytest.raises(Fault) as info:
        Session(mapping, IDENTITY).on_response(encode_response(3, 12, 2, metadata_response()))
    assert info.value.side == "upstream"


def test_truncated_request_is_clients_fault(mapping: PublicMap) -> None:
    with pytest.raises(Fault) as info:
        Session(mapping, IDENTITY).on_request(b"\x00\x00\x00\x03\x00\x00\x00")
    assert info.value.side == "client"


def test_broker_beyond_max_node_id_never_leaks(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    session.on_request(encode_request(3, 12, 1, "c", METADATA))
    with pytest.raises(Fault) as info:
        session.on_response(encode_response(3, 12, 1, metadata_response((5000, "10.0.0.5", 9092))))
    assert info.value.side == "gateway" and "max_node_id" in info.value.reason
