"""The session's pending local work: scripted exchanges, no sockets. The answer of a
deferred request keeps its place among the responses still in flight upstream."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.create_topics.v7.response import CreateTopicsResponse

from gateway.addresses.topology import PublicMap
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_head,
)
from gateway.quotas import QuotaConfig, QuotaEngine
from gateway.quotas.admin import QuotaAdmin
from gateway.quotas.store import FileQuotaStore
from gateway.session import Fault, Session

from ..quotas.test_admin import (
    ADMIN,
    alter_request,
    broker_answer,
    creatable,
    create_request,
    engine_for,
    topics_source,
)
from ..test_session import IDENTITY, METADATA, metadata_response


def correlation(frame: bytes, request: bool = False) -> int:
    return int(struct.unpack_from(">i", frame, 8 if request else 4)[0])


async def test_alter_answer_waits_for_the_response_ahead_of_it(
    mapping: PublicMap, tmp_path: Path
) -> None:
    engine = engine_for(tmp_path)
    session = Session(mapping, ADMIN, admin=QuotaAdmin(engine, ADMIN, topics_source({})))
    assert session.on_request(encode_request(3, 12, 1, "c", METADATA)) is not None
    alter = alter_request(("user", "alice", [("producer_byte_rate", 1000, False)]))
    assert session.on_request(encode_request(49, 1, 2, "c", alter)) is None  # not forwarded
    work = session.pending_work
    assert work is not None and session.inflight == 2
    out = session.complete_work(await work.run())
    assert out is None and session.pending_work is None
    assert session.take_ready() == []  # behind the Metadata response still upstream
    session.on_response(encode_response(3, 12, 1, metadata_response()))
    first, second = session.take_ready()
    assert (correlation(first), correlation(second)) == (1, 2)
    answer = decode_response(memoryview(second)[4:], 49, 1, AlterClientQuotasResponse)
    assert [int(e.error_code) for e in answer.entries] == [0]
    assert FileQuotaStore(tmp_path / "quotas.json").load().quotas  # the store changed


async def test_deferred_licence_check_forwards_the_allowed_topics(
    mapping: PublicMap, tmp_path: Path
) -> None:
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({}))
    session = Session(mapping, ADMIN, admin=admin)
    request = create_request(creatable("acme.ok", 2), creatable("acme.big", 40))
    assert session.on_request(encode_request(19, 7, 5, "c", request)) is None
    work = session.pending_work
    assert work is not None
    forwarded = session.complete_work(await work.run())
    assert forwarded is not None and correlation(forwarded, request=True) == 5
    assert session.awaiting_upstream == 1
    payload = memoryview(forwarded)[4:]
    upstream_request = decode_request(parse_request_head(payload), payload)
    assert [t.name for t in upstream_request.topics] == ["acme.ok"]  # the allowed one only
    session.on_response(encode_response(19, 7, 5, broker_answer(upstream_request)))
    (reply,) = session.take_ready()
    answer = decode_response(memoryview(reply)[4:], 19, 7, CreateTopicsResponse)
    assert {t.name: int(t.error_code) for t in answer.topics} == {"acme.ok": 0, "acme.big": 44}


def test_without_quotas_client_quota_apis_are_forwarded(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    alter = alter_request(("user", "alice", [("producer_byte_rate", 1000, False)]))
    frame = encode_request(49, 1, 2, "c", alter)
    assert session.on_request(frame) == frame
    assert session.pending_work is None


def test_a_unit_bug_closes_the_connection_instead_of_a_stall(
    mapping: PublicMap, tmp_path: Path
) -> None:
    cfg = QuotaConfig.model_validate({"store_file": tmp_path / "q.json"})
    admin = QuotaAdmin(QuotaEngine.from_config(cfg), ADMIN, topics_source({}))
    session = Session(mapping, ADMIN, admin=admin)
    alter = alter_request(("user", "alice", [("producer_byte_rate", 1000, False)]))
    session.on_request(encode_request(49, 1, 2, "c", alter))
    with pytest.raises(Fault) as fault:
        session.complete_work("not a list of results")
    assert fault.value.side == "gateway"
