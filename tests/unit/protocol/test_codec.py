import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseBroker
from kio.schema.produce.v7.request import ProduceRequest as ProduceV7
from kio.schema.produce.v9.request import ProduceRequest as ProduceV9
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32

from gateway.protocol.codec import (
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_head,
    peek_request,
    produce_acks,
)


def _payload(framed: bytes) -> memoryview:
    return memoryview(framed)[4:]


@given(
    client_id=st.one_of(st.none(), st.text(max_size=40)), correlation_id=st.integers(0, 2**31 - 1)
)
def test_request_header_roundtrip(client_id: str | None, correlation_id: int) -> None:
    body = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    data = _payload(encode_request(3, 12, correlation_id, client_id, body))
    head = parse_request_head(data)
    assert (head.api_key, head.api_version, head.correlation_id) == (3, 12, correlation_id)
    assert head.client_id == client_id
    assert decode_request(head, data) == body


def test_short_request_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        peek_request(b"\x00\x03\x00")


def test_truncated_client_id_is_a_protocol_error() -> None:
    body = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    data = bytes(_payload(encode_request(3, 12, 1, "a-long-client-id", body)))
    with pytest.raises(ProtocolError):
        parse_request_head(data[:14])


def test_trailing_bytes_are_refused() -> None:
    body = MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(), topics=())
    data = bytes(_payload(encode_response(3, 12, 9, body))) + b"\x00"
    with pytest.raises(ProtocolError, match="trailing"):
        decode_response(data, 3, 12)


def test_response_roundtrip_keeps_brokers() -> None:
    broker = MetadataResponseBroker(node_id=BrokerId(2), host="10.1.2.3", port=i32(9092))
    body = MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(broker,), topics=())
    assert decode_response(_payload(encode_response(3, 12, 9, body)), 3, 12) == body


@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_produce_acks_flexible(acks: int, transactional_id: str | None) -> None:
    body = ProduceV9(
        transactional_id=transactional_id,
        acks=i16(acks),
        timeout=datetime.timedelta(seconds=1),
        topic_data=(),
    )
    data = _payload(encode_request(0, 9, 1, "c", body))
    head = parse_request_head(data)
    assert produce_acks(data, head.body_offset, 9) == acks


@pytest.mark.parametrize("acks", [0, -1])
def test_produce_acks_legacy(acks: int) -> None:
    body = ProduceV7(
        transactional_id="tx", acks=i16(acks), timeout=datetime.timedelta(seconds=1), topic_data=()
    )
    data = _payload(encode_request(0, 7, 1, None, body))
    head = parse_request_head(data)
    assert produce_acks(data, head.body_offset, 7) == acks


def test_request_trailing_bytes_are_ignored_like_kafka_does() -> None:
    # librdkafka 2.16's all-topics MetadataRequest v13, captured: 3 bytes after the tags.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    head = parse_request_head(frame)
    request = decode_request(head, frame)
    assert request.topics is None
