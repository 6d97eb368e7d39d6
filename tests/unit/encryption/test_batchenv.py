"""Wire format 2 (``batchenv``): a whole batch in one envelope. Round trips for every
codec with the broker's rewrites applied (base offset, leader epoch, LogAppendTime,
re-compression with the topic's codec); placeholders at varint boundaries; producer
fields kept; tampering fails; v1, v2 and clear batches mixed on one partition."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import kio.schema.produce.v9.response as p9r
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kio.schema.errors import ErrorCode

from gateway.encryption import EncryptionFilter, batchenv
from gateway.encryption.batch import (
    CRC_START,
    TRANSACTIONAL,
    Batch,
    BatchError,
    Record,
    encode,
    parse,
)
from gateway.encryption.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from gateway.encryption.deks import DekCache
from gateway.encryption.envelope import EnvelopeError, KeyRef
from gateway.encryption.fastpath import Head
from gateway.encryption.policy import Rule
from gateway.encryption.records import RecordsError, decrypt_records, encrypt_records

from .test_filter import batch, fetch_v12, make_filter, produce_v9, run_request, run_response

REF = KeyRef("acme", 3, b"\x07" * 40)
AEAD = AESGCM(os.urandom(32))
TOPIC = b"enc.orders"
LOG_APPEND_TIME = 0x08


def records(count: int) -> list[Record]:
    out = []
    for i in range(count):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 6 else b"SECRET-%d-" % i + b"v" * (i % 90)
        headers = (("h", b"1"), ("é", None)) if i % 2 else ()
        out.append(Record(i, (i * 37) % 500 - 100, key, value, headers))
    return out


def produced(count: int, codec: int = NONE, attrs: int = 0, pid: int = 42) -> bytes:
    recs = records(count)
    top = max(r.timestamp_delta for r in recs)
    return encode(Batch(0, -1, codec | attrs, count - 1, 5000, 5000 + top, pid, 3, 17, recs))


def brokered(data: bytes, base: int = 900, epoch: int = 7, append_time: int | None = None) -> bytes:
    """What a broker does to a v2 batch it appends in place: base offset, leader epoch,
    max timestamp (the largest record timestamp, or LogAppendTime's), CRC."""
    batch = parse(data)
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base)
    struct.pack_into(">i", out, 12, epoch)
    if append_time is None:
        top = max(batch.base_timestamp + r.timestamp_delta for r in batch.records)
    else:
        top = append_time
        struct.pack_into(">h", out, 21, batch.attributes | LOG_APPEND_TIME)
    struct.pack_into(">q", out, 35, top)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def opened(data: bytes, topic: bytes = TOPIC) -> bytes:
    head = Head(data)
    span = batchenv.envelope_of(head)
    assert span is not None
    return b"".join(batchenv.open_(head, span, lambda ref: AEAD, topic))


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_round_trip_every_codec_with_the_brokers_rewrites(codec: int) -> None:
    clear = produced(50, codec, TRANSACTIONAL)
    sealed = batchenv.seal(Head(clear), AEAD, REF, TOPIC)
    stored = parse(sealed)  # a valid v2 batch: CRC, lengths, records
    original = parse(clear)
    assert stored.attributes == TRANSACTIONAL  # stored uncompressed, bit kept
    assert (stored.producer_id, stored.producer_epoch, stored.base_sequence) == (42, 3, 17)
    assert len(stored.records) == 50 and stored.last_offset_delta == 49
    assert [r.offset_delta for r in stored.records] == list(range(50))
    assert all(r.key is None and not r.headers for r in stored.records)
    assert all(r.value is None for r in stored.records[1:])
    assert b"SECRET" not in sealed and b"key-" not in sealed
    # the broker's maximum of the record timestamps is the producer's
    assert stored.max_timestamp == original.max_timestamp
    assert {stored.base_timestamp + r.timestamp_delta for r in stored.records} == {
        original.max_timestamp
    }
    back = opened(brokered(sealed))
    assert back == brokered(clear)  # byte for byte what the broker would have served
    got = parse(back)
    assert (got.base_offset, got.partition_leader_epoch, got.attributes) == (
        900,
        7,
        codec | TRANSACTIONAL,
    )
    assert got.records == original.records


def test_log_append_time_and_a_broker_recompression_are_kept() -> None:
    clear = produced(20, LZ4)
    sealed = brokered(batchenv.seal(Head(clear), AEAD, REF, TOPIC), append_time=123456)
    back = parse(opened(sealed))
    assert back.attributes == LZ4 | LOG_APPEND_TIME and back.max_timestamp == 123456
    assert back.base_timestamp == 5000 and back.records == parse(clear).records
    # a topic with compression.type=gzip: the broker rebuilds the stored batch gzipped
    stored = parse(sealed)
    stored.attributes |= GZIP
    again = parse(opened(encode(stored)))
    assert again.attributes == LZ4 | LOG_APPEND_TIME and again.records == parse(clear).records


@pytest.mark.parametrize("count", [1, 2, 63, 64, 65, 127, 128, 8191, 8192, 8193])
def test_placeholders_at_varint_boundaries(count: int) -> None:
    clear = produced(count)
    sealed = batchenv.seal(Head(clear), AEAD, REF, TOPIC)
    stored = parse(sealed)
    assert [r.offset_delta for r in stored.records] == list(range(count))
    assert parse(opened(brokered(sealed))).records == parse(clear).records


def test_the_placeholder_table_grows_past_its_first_size() -> None:
    table = batchenv._Placeholders(size=4)
    expected = b"".join(
        encode(Batch(0, 0, 0, i, 0, 0, -1, -1, -1, [Record(i, 0, None, None)]))[61:]
        for i in range(1, 300)
    )
    assert bytes(table.of(300)) == expected
    assert bytes(table.of(3)) == expected[: len(bytes(table.of(3)))]
    capped = batchenv._Placeholders(size=4, cap=100)  # past its cap: made, not kept
    assert bytes(capped.of(300)) == expected and len(capped.ends) == 101
    assert bytes(capped.of(50)) == bytes(table.of(50))


def test_a_record_count_its_bytes_cannot_hold_fails_before_any_work() -> None:
    sealed = bytearray(batchenv.seal(Head(produced(3)), AEAD, REF, TOPIC))
    struct.pack_into(">i", sealed, 57, 2**31 - 1)  # the record count
    struct.pack_into(">I", sealed, 17, crc32c.crc32c(memoryview(sealed)[CRC_START:]))
    with pytest.raises(BatchError, match="more than the batch's bytes hold"):
        Head(bytes(sealed))  # the header alone refuses it (fastpath.MIN_RECORD_SIZE)


def test_tampering_fails() -> None:
    sealed = brokered(batchenv.seal(Head(produced(10)), AEAD, REF, TOPIC))
    with pytest.raises(EnvelopeError):
        opened(sealed, b"enc.other")  # moved to another topic
    # a record dropped: count, last offset delta and placeholders all consistent
    stored = parse(sealed)
    stored.records = stored.records[:-1]
    stored.last_offset_delta -= 1
    with pytest.raises(EnvelopeError, match="tag"):
        opened(encode(stored))
    # a byte of the ciphertext, and one of the envelope header (the base timestamp)
    value = stored.records[0].value
    assert value is not None
    for at in (len(value) - 20, 7 + 4 + 3 + 40):
        bad = bytearray(value)
        bad[at] ^= 1
        changed = parse(sealed)
        changed.records[0] = Record(0, 0, None, bytes(bad))
        with pytest.raises(EnvelopeError):
            opened(encode(changed))
    # a placeholder that carries something
    changed = parse(sealed)
    changed.records[3] = Record(3, 0, None, b"x")
    with pytest.raises(EnvelopeError, match="placeholders"):
        batchenv.envelope_of(Head(encode(changed)))


def test_malformed_producer_records_are_refused() -> None:
    recs = records(5)
    recs[2] = Record(7, 0, None, b"x")  # offset delta 7 in place of 2
    clear = encode(Batch(0, -1, 0, 4, 5000, 5000, -1, -1, -1, recs))
    with pytest.raises(Exception, match="offset delta 7"):
        batchenv.seal(Head(clear), AEAD, REF, TOPIC)


def test_mixed_v1_v2_and_clear_batches_on_one_partition(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    deks = DekCache(item.kms, item.settings.dek)  # key manager calls on this thread
    first, second, third = produced(30, GZIP), produced(64, ZSTD), produced(5)
    v1 = encrypt_records(first, "enc.t", Rule("acme", True, True), deks)
    v2 = encrypt_records(second, "enc.t", Rule("acme", False, False, batch=True), deks)
    assert deks._current["acme"].uses == 30 + 1  # a batch is one DEK use
    log = b"".join(brokered(b, base=n) for b, n in ((v1, 0), (third, 30), (v2, 35)))
    back = decrypt_records(log, "enc.t", deks)
    want = b"".join(brokered(b, base=n) for b, n in ((first, 0), (third, 30), (second, 35)))
    assert [parse(b).records for b in _batches(back)] == [parse(b).records for b in _batches(want)]
    # a truncated tail after a v2 batch is dropped, as with v1
    assert decrypt_records(log[:-10], "enc.t", deks) == b"".join(_batches(back)[:2])
    # the wrong topic: the partition fails, no ciphertext handed out
    with pytest.raises(RecordsError):
        decrypt_records(brokered(v2), "enc.u", deks)


def _batches(blob: bytes) -> list[bytes]:
    from gateway.encryption.batch import split

    return [p for p in split(blob) if isinstance(p, bytes)]


def batch_filter(tmp_path: Path) -> EncryptionFilter:
    item = EncryptionFilter(
        {
            "kms": {
                "backend": "file",
                "file": {"path": str(tmp_path / "keks.json")},
                "allow_development_backend": True,
            },
            "policies": [
                {"tenant": "*", "prefixes": ["enc.b."], "granularity": "batch"},
                {"tenant": "*", "prefixes": ["enc."]},
            ],
        }
    )
    item.kms.create("acme")
    return item


@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_the_filter_seals_per_batch_where_the_policy_says(tmp_path: Path, codec: int) -> None:
    item = batch_filter(tmp_path)
    original = batch(codec)
    call = run_request(item, produce_v9("enc.b.orders", original))
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    stored = parse(sealed)
    assert stored.compression == NONE and len(stored.records) == 2
    value = stored.records[0].value
    assert value is not None and value[:4] == b"KGE\x02" and b"MARKER" not in sealed
    back = run_response(item, fetch_v12("enc.b.orders", sealed))
    assert bytes(back.body.responses[0].partitions[0].records) == original
    # the record-granularity rule still applies elsewhere
    other = run_request(item, produce_v9("enc.r", original))
    first = parse(bytes(other.body.topic_data[0].partition_data[0].records)).records[0]
    assert first.value is not None and first.value[:4] == b"KGE\x01"


def test_a_batch_that_does_not_decrypt_fails_its_partition(tmp_path: Path) -> None:
    item = batch_filter(tmp_path)
    call = run_request(item, produce_v9("enc.b.t", batch()))
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    part = run_response(item, fetch_v12("enc.b.other", sealed)).body.responses[0].partitions[0]
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def test_a_compacted_topics_refusal_says_what_to_change(tmp_path: Path) -> None:
    item = batch_filter(tmp_path)
    refusal = p9r.PartitionProduceResponse(
        index=0, error_code=ErrorCode.invalid_record, base_offset=-1,
        record_errors=(p9r.BatchIndexAndErrorMessage(
            batch_index=0,
            batch_index_error_message="Compacted topic cannot accept message without key",
        ),),
        error_message="One or more records have been rejected",
    )  # fmt: skip
    body = p9r.ProduceResponse(
        responses=(p9r.TopicProduceResponse(name="enc.b.c", partition_responses=(refusal,)),)
    )
    part = run_response(item, body, key=0).body.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record
    assert "granularity: record" in (part.error_message or "")
    other = p9r.ProduceResponse(
        responses=(p9r.TopicProduceResponse(name="enc.r", partition_responses=(refusal,)),)
    )
    assert not run_response(item, other, key=0).replaced


def test_the_producers_records_are_checked_before_sealing() -> None:
    """Random corruption of a producer's records (CRC made right again): sealed only
    when the records are well formed, as ``batch.parse`` reads them, with offset
    deltas in order; otherwise a ``BatchError``, never another exception. (The walk
    refuses a negative header count, which ``parse`` reads as none, and, as the
    broker, does not decode header keys as UTF-8.)"""
    import random

    rng = random.Random(18)
    clear = bytearray(produced(12))
    sealed_count = 0
    for _ in range(400):
        bad = bytearray(clear)
        for _flip in range(rng.randint(1, 3)):
            bad[rng.randrange(61, len(bad))] = rng.randrange(256)
        struct.pack_into(">I", bad, 17, crc32c.crc32c(memoryview(bad)[CRC_START:]))
        why = ""
        try:
            parsed = parse(bytes(bad))
            well_formed = [r.offset_delta for r in parsed.records] == list(range(12))
        except BatchError as exc:
            well_formed, why = False, str(exc)
        try:
            batchenv.seal(Head(bytes(bad)), AEAD, REF, TOPIC)
        except BatchError as exc:
            assert not well_formed or "negative header count" in str(exc)
        else:
            sealed_count += 1
            assert well_formed or why == "header key is not UTF-8"
    assert 0 < sealed_count < 400
