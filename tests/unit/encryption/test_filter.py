"""The encryption filter on kio messages built by hand (no session, no sockets), with
the development file key manager: Produce records are sealed, Fetch records opened,
other topics untouched, and every failure is an error, never ciphertext as data."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kio.schema.fetch.v12.response as f12
import kio.schema.fetch.v16.response as f16
import kio.schema.metadata.v12.response as m12
import kio.schema.produce.v9.request as p9
import kio.schema.produce.v13.request as p13
import pytest
from kio.schema.errors import ErrorCode

from gateway.encryption import EncryptionFilter
from gateway.encryption.batch import Batch, Record, encode, parse, split
from gateway.encryption.filter import PENDING
from gateway.filters.api import FilterContext, RequestCall, ResponseCall
from gateway.identity import ClientIdentity
from gateway.protocol.codec import encode_body

ALICE = ClientIdentity("public", "10.0.0.7", 50000, "User:alice", tenant="acme")


def make_filter(tmp_path: Path, **dek: Any) -> EncryptionFilter:
    item = EncryptionFilter(
        {
            "kms": {
                "backend": "file",
                "file": {"path": str(tmp_path / "keks.json")},
                "allow_development_backend": True,
            },
            "dek": dek,
            "policies": [{"tenant": "*", "prefixes": ["enc."]}],
        }
    )
    item.kms.create("acme")
    return item


def batch(codec: int = 0, values: tuple[bytes, ...] = (b"MARKER-1", b"MARKER-2")) -> bytes:
    recs = [Record(i, i, f"k{i}".encode(), v, (("h", b"x"),)) for i, v in enumerate(values)]
    return encode(Batch(0, 0, codec, len(recs) - 1, 1000, 1001, 5, 1, 0, recs))


def context() -> FilterContext:
    return FilterContext(ALICE, logging.getLogger("kgw.filters.test"))


def produce_v9(topic: str, records: bytes) -> p9.ProduceRequest:
    data = p9.TopicProduceData(
        name=topic, partition_data=(p9.PartitionProduceData(index=0, records=records),)
    )
    return p9.ProduceRequest(acks=-1, timeout=dt.timedelta(seconds=1), topic_data=(data,))


def run_request(item: EncryptionFilter, body: Any) -> RequestCall:
    """The hook as the chain runs it: a wait (a key manager call) is awaited and the
    hook runs again on the request as sent."""
    ctx = context()
    for _ in range(5):
        call = RequestCall(0, int(type(body).__version__), 7, ctx, lambda: body)
        item.on_request(call)
        if call.waiting is None:
            break
        asyncio.run(_awaited(call.waiting))
    assert call.waiting is None
    encode_body(call.body)  # what the chain would send must encode
    return call


async def _awaited(run: Callable[[], Awaitable[Any]]) -> None:
    await run()


def fetch_v12(topic: str, records: bytes | None) -> f12.FetchResponse:
    part = f12.PartitionData(
        partition_index=0, error_code=ErrorCode.none, high_watermark=10,
        aborted_transactions=None, records=records,
    )  # fmt: skip
    return f12.FetchResponse(
        throttle_time=dt.timedelta(0), error_code=ErrorCode.none,
        responses=(f12.FetchableTopicResponse(topic=topic, partitions=(part,)),),
    )  # fmt: skip


def run_response(item: EncryptionFilter, body: Any, key: int = 1) -> ResponseCall:
    """The hook as a connection runs it: a partition whose DEK is being unwrapped comes
    back empty, the unwrap is awaited (the next Fetch waits for it) and the same
    records are answered again."""
    ctx = context()
    for _ in range(5):
        call = ResponseCall(key, int(type(body).__version__), 7, ctx, lambda: body)
        item.on_response(call)
        pending = ctx.state.pop(PENDING, [])
        if not pending:
            break
        for wait in pending:
            asyncio.run(_awaited(wait.wait))
    encode_body(call.body)
    return call


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_sealed_on_produce_and_opened_on_fetch(tmp_path: Path, codec: int) -> None:
    item = make_filter(tmp_path)
    original = batch(codec)
    call = run_request(item, produce_v9("enc.orders", original))
    assert call.replaced and call.rejection is None
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    assert b"MARKER" not in sealed
    on_disk = parse(sealed)
    assert on_disk.compression == codec and on_disk.producer_id == 5
    assert all(r.value is not None and r.value[:4] == b"KGE\x01" for r in on_disk.records)
    back = run_response(item, fetch_v12("enc.orders", sealed))
    assert bytes(back.body.responses[0].partitions[0].records) == original


def test_other_topics_untouched(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    call = run_request(item, produce_v9("plain", batch()))
    assert not call.replaced
    response = fetch_v12("plain", batch())
    assert not run_response(item, response).replaced
    # a policy topic holding only records written in clear passes byte for byte
    assert not run_response(item, fetch_v12("enc.x", batch())).replaced


def test_topic_ids_learned_from_metadata(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    topic_id = uuid.uuid4()
    data = p13.TopicProduceData(
        topic_id=topic_id, partition_data=(p13.PartitionProduceData(index=0, records=batch()),)
    )
    body = p13.ProduceRequest(acks=-1, timeout=dt.timedelta(seconds=1), topic_data=(data,))
    call = run_request(item, body)
    assert call.rejection is not None and call.rejection[0] == ErrorCode.unknown_topic_id
    meta = m12.MetadataResponse(
        throttle_time=dt.timedelta(0), brokers=(),
        topics=(m12.MetadataResponseTopic(
            error_code=ErrorCode.none, name="enc.ids", topic_id=topic_id, is_internal=False,
            partitions=(),
        ),),
    )  # fmt: skip
    run_response(item, meta, key=3)
    call = run_request(item, body)
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    assert b"MARKER" not in sealed
    part = f16.PartitionData(
        partition_index=0, error_code=ErrorCode.none, high_watermark=10,
        aborted_transactions=None, records=sealed,
    )  # fmt: skip
    fetch = f16.FetchResponse(
        throttle_time=dt.timedelta(0), error_code=ErrorCode.none,
        responses=(f16.FetchableTopicResponse(topic_id=topic_id, partitions=(part,)),),
    )  # fmt: skip
    assert bytes(run_response(item, fetch).body.responses[0].partitions[0].records) == batch()


def test_truncated_last_batch_dropped_not_handed_out(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    sealed = bytes(
        run_request(item, produce_v9("enc.t", batch())).body.topic_data[0].partition_data[0].records
    )
    second = bytes(
        run_request(item, produce_v9("enc.t", batch(values=(b"MARKER-3",))))
        .body.topic_data[0]
        .partition_data[0]
        .records
    )
    blob = sealed + second[: len(second) - 10]
    opened = bytes(
        run_response(item, fetch_v12("enc.t", blob)).body.responses[0].partitions[0].records
    )
    assert opened == batch()
    assert len(split(opened)) == 1


def test_disabled_kek_refuses_writes_after_the_dek_ages(tmp_path: Path) -> None:
    item = make_filter(tmp_path, max_age_seconds=0.000001)
    item.kms.disable("acme")
    call = run_request(item, produce_v9("enc.orders", batch()))
    assert call.rejection is not None
    code, message = call.rejection
    assert code == ErrorCode.invalid_record and "disabled" in (message or "")


def test_destroyed_kek_fails_the_partition_never_ciphertext(tmp_path: Path) -> None:
    item = make_filter(tmp_path, decrypt_cache_seconds=0)
    sealed = bytes(
        run_request(item, produce_v9("enc.o", batch())).body.topic_data[0].partition_data[0].records
    )
    item.kms.destroy("acme")
    part = run_response(item, fetch_v12("enc.o", sealed)).body.responses[0].partitions[0]
    assert part.error_code == ErrorCode.corrupt_message
    assert not part.records


def test_corrupt_envelope_fails_the_partition(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    sealed = bytes(
        run_request(item, produce_v9("enc.o", batch())).body.topic_data[0].partition_data[0].records
    )
    parsed = parse(sealed)
    bad = parsed.records[0]
    value = bytearray(bad.value or b"")
    value[-1] ^= 1
    parsed.records[0] = Record(bad.offset_delta, bad.timestamp_delta, bad.key, bytes(value))
    part = run_response(item, fetch_v12("enc.o", encode(parsed))).body.responses[0].partitions[0]
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def test_file_backend_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="development only"):
        EncryptionFilter(
            {
                "kms": {"backend": "file", "file": {"path": str(tmp_path / "k.json")}},
                "policies": [{"prefixes": ["enc."]}],
            }
        )


def test_a_tenant_no_policy_covers_passes_in_clear_untouched(tmp_path: Path) -> None:
    """Its Produce is decoded (to see whether it names a topic some policy encrypts for
    others: ``test_hostile``), but nothing of it is replaced."""
    item = EncryptionFilter(
        {
            "kms": {
                "backend": "file",
                "file": {"path": str(tmp_path / "keks.json")},
                "allow_development_backend": True,
            },
            "policies": [{"tenant": "other", "prefixes": ["enc."]}],
        }
    )

    for topic in ("enc.x", "plain"):
        call = run_request(item, produce_v9(topic, batch()))
        assert call.rejection is None and not call.replaced


def test_produce_and_fetch_offered_up_to_v12_only(tmp_path: Path) -> None:
    from gateway.protocol.apis import ApiSpec

    item = make_filter(tmp_path)
    ctx = context()
    assert item.advertise(ctx, 0, ApiSpec(0, "produce", 3, 13)) == ApiSpec(0, "produce", 3, 12)
    assert item.advertise(ctx, 1, ApiSpec(1, "fetch", 4, 17)) == ApiSpec(1, "fetch", 4, 12)
    listed = ApiSpec(3, "metadata", 0, 13)
    assert item.advertise(ctx, 3, listed) is listed
    assert item.advertise(ctx, 1, None) is None
    # share groups read records this filter does not open: ShareFetch is not offered
    assert item.advertise(ctx, 78, ApiSpec(78, "share_fetch", 1, 1)) is None
