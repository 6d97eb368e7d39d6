"""The refusal table covers every API and version kio knows: a refused request's
answer decodes in its own version and carries the error at the top level or on
every entry the request named."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from gateway.protocol import apis
from gateway.protocol.codec import decode_response, encode_response
from gateway.protocol.refusal import ENTRIES, refuse

from ..enforcement.build import error_codes
from ..enforcement.samples import sample_request

CASES = [(k, v) for k in sorted(api_key_map) for v in sorted(apis.decodable_versions(k))]
IDS = [f"{apis.api_name(k)}-v{v}" for k, v in CASES]
# DescribeLogDirs v1-2 have no error field at all: Kafka answers them with no results.
NO_ERROR_FIELD = {(35, 1), (35, 2)}


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_every_api_kio_knows_has_a_row() -> None:
    assert set(ENTRIES) == set(api_key_map)


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_every_row_names_fields_of_the_schemas(key: int) -> None:
    versions = apis.decodable_versions(key)
    request_fields = set().union(*(_fields(apis.request_schema(key, v)) for v in versions))
    response_fields = set().union(*(_fields(apis.response_schema(key, v)) for v in versions))
    for row in ENTRIES[key]:
        assert row.request.split(".")[0] in request_fields, row
        assert row.response in response_fields, row


@pytest.mark.parametrize(("key", "version"), CASES, ids=IDS)
def test_a_refusal_decodes_and_carries_the_code_everywhere(key: int, version: int) -> None:
    request = sample_request(apis.request_schema(key, version), "orders")
    response_cls = apis.response_schema(key, version)
    refused = refuse(request, response_cls, ErrorCode.unsupported_version, "not here")
    frame = encode_response(key, version, 7, refused)
    decoded = decode_response(memoryview(frame)[4:], key, version)
    assert decoded == refused
    codes = error_codes(decoded)
    if (key, version) in NO_ERROR_FIELD:
        assert codes == {}
        return
    assert codes, "the refusal carries no error code"
    assert set(codes.values()) == {int(ErrorCode.unsupported_version)}
    for row in ENTRIES[key]:  # one entry back for each entry the request named
        if hasattr(request, row.request.split(".")[0]) and row.response in _fields(response_cls):
            assert len(getattr(decoded, row.response)) >= 1, row


def test_partitions_come_back_with_their_indexes() -> None:
    request = sample_request(apis.request_schema(0, 13), "orders")
    refused = refuse(request, apis.response_schema(0, 13), ErrorCode.unsupported_version)
    (topic,) = refused.responses
    assert topic.topic_id == request.topic_data[0].topic_id
    assert [int(p.error_code) for p in topic.partition_responses] == [35]
