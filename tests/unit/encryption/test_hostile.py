"""The encryption filter against a hostile tenant: control batches, envelope-shaped values
written in clear, forged envelopes, batches larger than a DEK's uses, secrets in reprs.
Each case must end in a clear refusal or a failed partition, never in plaintext to a
broker, ciphertext to a client, or an exception that closes the connection."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kio.schema.errors import ErrorCode

from gateway.encryption import EncryptionFilter, batchenv, envelope
from gateway.encryption.batch import CONTROL, Batch, Record, encode, parse
from gateway.encryption.compression import GZIP
from gateway.encryption.envelope import KeyRef
from gateway.encryption.fastpath import Head
from gateway.kms.api import WrappedDek

from .test_filter import (
    batch,
    fetch_v12,
    make_filter,
    produce_v9,
    run_request,
    run_response,
)


def records_of(values: list[bytes | None], attributes: int = 0) -> bytes:
    recs = [Record(i, i, f"k{i}".encode(), v) for i, v in enumerate(values)]
    return encode(Batch(0, 0, attributes, len(recs) - 1, 1000, 1001, 5, 1, 0, recs))


def forged(kek: bytes = b"acme", version: int = 1, wrapped: bytes = b"\x01" * 40) -> bytes:
    head = b"KGE\x01\x00" + bytes([len(kek)]) + kek + struct.pack(">HB", version, len(wrapped))
    return head + wrapped + b"\x00" * 12 + b"\x00" * 32


def fetched(item: EncryptionFilter, topic: str, blob: bytes) -> Any:
    return run_response(item, fetch_v12(topic, blob)).body.responses[0].partitions[0]


def other_tenants_filter(tmp_path: Path) -> EncryptionFilter:
    """Policies for tenant ``other`` only: ALICE (tenant ``acme``) writes in clear."""
    return EncryptionFilter(
        {
            "kms": {
                "backend": "file",
                "file": {"path": str(tmp_path / "keks.json")},
                "allow_development_backend": True,
            },
            "policies": [{"tenant": "other", "prefixes": ["enc."]}],
        }
    )


def test_control_batch_in_a_produce_is_refused_not_passed_in_clear(tmp_path: Path) -> None:
    """Clients never write control batches (only the transaction coordinator does); one
    in a Produce would have been passed unencrypted."""
    item = make_filter(tmp_path)
    call = run_request(item, produce_v9("enc.orders", records_of([b"MARKER-ctl"], CONTROL)))
    assert call.rejection is not None
    code, message = call.rejection
    assert code == ErrorCode.invalid_record and "control" in (message or "")


def test_old_magic_and_malformed_batches_are_refused(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    good = batch()
    old = bytearray(good)
    old[16] = 1  # magic 1
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    lying = bytearray(good)
    struct.pack_into(">i", lying, 8, len(good) + 100)  # longer than the bytes
    for blob in (bytes(old), bytes(bad_crc), bytes(lying), good[:30], good + good[:20]):
        call = run_request(item, produce_v9("enc.orders", blob))
        assert call.rejection is not None and call.rejection[0] == ErrorCode.invalid_record


@pytest.mark.parametrize(
    "value",
    [
        b"KGE\x01\x00",  # as short as an envelope-looking value gets
        b"KGE\x01\x00\x00",  # an empty KEK name
        forged(wrapped=b"\x01"),  # a wrapped DEK the key wrap cannot even try
        forged(wrapped=b"\x01" * 24),  # unwraps (if at all) to a 16-byte key
        forged(kek=b"\xff\xfe"),  # not UTF-8
        forged(kek=b"nobody"),
    ],
)
def test_envelope_shaped_garbage_fails_the_partition_never_the_connection(
    tmp_path: Path, value: bytes
) -> None:
    item = make_filter(tmp_path)
    part = fetched(item, "enc.orders", records_of([b"fine", value]))
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def test_a_short_v2_piece_in_a_fetch_fails_the_partition(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    piece = struct.pack(">qiib", 0, 5, 0, 2)  # magic 2, batch length 5: 17 bytes
    part = fetched(item, "enc.orders", piece + batch())
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def test_a_tenant_writing_in_clear_cannot_plant_an_envelope_on_an_encrypted_topic(
    tmp_path: Path,
) -> None:
    """A tenant no policy covers writes in clear; a value of its that looks like an
    envelope, on a topic some policy encrypts, would fail every consumer's fetch of
    that partition (and make the gateway ask the key manager about any KEK named)."""
    item = other_tenants_filter(tmp_path)
    call = run_request(item, produce_v9("enc.shared", records_of([b"ok", forged(b"other")])))
    assert call.rejection is not None
    code, message = call.rejection
    assert code == ErrorCode.invalid_record and "envelope" in (message or "")
    # nor its prefix alone: a fetch reads record 0 "KGE\x02" as a batch envelope
    bare = run_request(item, produce_v9("enc.shared", records_of([b"KGE\x02", b"ok"])))
    assert bare.rejection is not None and bare.rejection[0] == ErrorCode.invalid_record
    # a record count its bytes cannot hold is refused, before any key is made or drawn
    lying = bytearray(records_of([b"ok"]))
    struct.pack_into(">i", lying, 57, 1_000_000)
    struct.pack_into(">I", lying, 17, crc32c.crc32c(memoryview(lying)[21:]))
    refused = run_request(item, produce_v9("enc.shared", bytes(lying)))
    assert refused.rejection is not None and "more than the batch" in (refused.rejection[1] or "")
    # clear values that do not look like envelopes still pass untouched
    plain = run_request(item, produce_v9("enc.shared", records_of([b"ok", b"KG", None])))
    assert plain.rejection is None and not plain.replaced
    # and topics no policy covers are not scanned at all
    free = run_request(item, produce_v9("free", records_of([forged(b"other")])))
    assert free.rejection is None and not free.replaced


def test_a_covered_tenants_envelope_shaped_value_is_sealed_and_comes_back(
    tmp_path: Path,
) -> None:
    item = make_filter(tmp_path)
    original = records_of([forged(b"acme"), b""])
    call = run_request(item, produce_v9("enc.orders", original))
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    assert bytes(fetched(item, "enc.orders", sealed).records) == original


def test_a_batch_larger_than_max_uses_spreads_over_several_deks(tmp_path: Path) -> None:
    item = make_filter(tmp_path, max_uses=3)
    values = [f"MARKER-{i}".encode() for i in range(10)]
    original = records_of(values, GZIP)  # type: ignore[arg-type]
    call = run_request(item, produce_v9("enc.orders", original))
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    uses: dict[bytes, int] = {}
    for record in parse(sealed).records:
        ref, _, _ = envelope.key_ref(record.value or b"")
        uses[ref.wrapped] = uses.get(ref.wrapped, 0) + 1
    assert max(uses.values()) <= 3 and sum(uses.values()) == 10
    assert bytes(fetched(item, "enc.orders", sealed).records) == original


def test_no_dek_in_reprs() -> None:
    secret = bytes(range(32))
    text = repr(WrappedDek(secret, b"w" * 40, 1))
    assert repr(secret) not in text and secret.hex() not in text


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_compression_bomb_is_refused_at_the_limit(codec: int) -> None:
    from gateway.encryption.compression import CompressionError, compress, decompress

    data = b"\x00" * 3_000_000
    packed = compress(codec, data)
    assert decompress(codec, packed) == data  # under the default limit: whole
    assert decompress(codec, packed, limit=len(data)) == data
    with pytest.raises(CompressionError):
        decompress(codec, packed, limit=1_000_000)


def test_a_bomb_in_a_produce_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.encryption import compression

    monkeypatch.setattr(compression, "MAX_DECOMPRESSED", 100_000)
    item = make_filter(tmp_path)
    bomb = records_of([b"\x00" * 1_000_000], 4)
    assert len(bomb) < 10_000
    call = run_request(item, produce_v9("enc.orders", bomb))
    assert call.rejection is not None and call.rejection[0] == ErrorCode.invalid_record
    part = fetched(item, "enc.orders", bomb)
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def produce_of(version: int, topics: dict[str, list[bytes]], acks: int = -1) -> Any:
    import datetime as dt
    import importlib

    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    data = tuple(
        schema.TopicProduceData(
            name=name,
            partition_data=tuple(
                schema.PartitionProduceData(index=i, records=blob) for i, blob in enumerate(blobs)
            ),
        )
        for name, blobs in topics.items()
    )
    return schema.ProduceRequest(acks=acks, timeout=dt.timedelta(seconds=1), topic_data=data)


@pytest.mark.parametrize("version", range(3, 13))
@pytest.mark.parametrize("acks", [0, -1])
def test_every_offered_produce_version_mixing_topics(
    tmp_path: Path, version: int, acks: int
) -> None:
    """Each Produce version the gateway offers, several partitions and topics, encrypted
    and not, in one request: only the covered ones sealed, each of their records."""
    item = make_filter(tmp_path)
    many = records_of([f"MARKER-{i}".encode() for i in range(7)], GZIP)
    body = produce_of(version, {"plain": [many], "enc.a": [many, batch()], "x": [batch()]}, acks)
    call = run_request(item, body)
    assert call.rejection is None
    out = {t.name: [bytes(p.records) for p in t.partition_data] for t in call.body.topic_data}
    assert out["plain"] == [many] and out["x"] == [batch()]
    assert all(b"MARKER" not in blob for blob in out["enc.a"])
    opened = [bytes(fetched(item, "enc.a", blob).records) for blob in out["enc.a"]]
    assert opened == [many, batch()]
    # one bad partition of a covered topic: the whole request is refused
    bad = produce_of(version, {"plain": [many], "enc.a": [many, many[:-3]]}, acks)
    refused = run_request(item, bad)
    assert refused.rejection is not None and refused.rejection[0] == ErrorCode.invalid_record


def test_one_failing_partition_leaves_the_others_and_the_response_whole(tmp_path: Path) -> None:
    import datetime as dt

    import kio.schema.fetch.v12.response as f12

    item = make_filter(tmp_path)
    many = records_of([f"MARKER-{i}".encode() for i in range(50)], 4)
    sealed = bytes(
        run_request(item, produce_v9("enc.a", many)).body.topic_data[0].partition_data[0].records
    )
    aborted = (f12.AbortedTransaction(producer_id=5, first_offset=0),)

    def part(index: int, records: bytes) -> Any:
        return f12.PartitionData(
            partition_index=index, error_code=ErrorCode.none, high_watermark=99,
            last_stable_offset=98, aborted_transactions=aborted, records=records,
        )  # fmt: skip

    body = f12.FetchResponse(
        throttle_time=dt.timedelta(0), error_code=ErrorCode.none, session_id=77,
        responses=(
            f12.FetchableTopicResponse(topic="plain", partitions=(part(0, sealed),)),
            f12.FetchableTopicResponse(topic="enc.a", partitions=(
                part(0, sealed), part(1, records_of([b"KGE\x01\x00"])), part(2, b""),
            )),
        ),
    )  # fmt: skip
    out = run_response(item, body).body
    assert out.session_id == 77 and [t.topic for t in out.responses] == ["plain", "enc.a"]
    assert bytes(out.responses[0].partitions[0].records) == sealed  # not covered: as it came
    good, bad, empty = out.responses[1].partitions
    assert bytes(good.records) == many and good.aborted_transactions == aborted
    assert good.high_watermark == 99 and good.last_stable_offset == 98
    assert bad.error_code == ErrorCode.corrupt_message and not bad.records
    assert empty.error_code == ErrorCode.none and empty.partition_index == 2


def test_a_kek_name_too_long_for_the_envelope_is_a_clear_refusal(tmp_path: Path) -> None:
    item = make_filter(tmp_path)
    long_name = "é" * 150  # 300 bytes in UTF-8: over the envelope's 255
    item.kms.create(long_name)
    from gateway.encryption.deks import DekCache
    from gateway.encryption.policy import Rule
    from gateway.encryption.records import RecordsError, encrypt_records

    inline = DekCache(item.kms, item.settings.dek)  # key manager calls on this thread
    with pytest.raises(RecordsError, match=r"1\.\.255 bytes"):
        encrypt_records(batch(), "enc.x", Rule(long_name, False, False), inline)


def _forged_batch_envelope(kek: str, wrapped: bytes, topic: bytes = b"enc.orders") -> bytes:
    """A well-formed format-2 batch sealed under a key nobody gave the gateway, naming
    ``kek`` and ``wrapped`` (what a tenant able to write in clear could try to plant)."""
    aead = AESGCM(os.urandom(32))
    clear = records_of([b"MARKER-forged-1", b"MARKER-forged-2"])
    return batchenv.seal(Head(clear), aead, KeyRef(kek, 1, wrapped), topic)


@pytest.mark.parametrize(
    ("kek", "wrapped"),
    [
        ("acme", b"\x01" * 40),  # the topic's own KEK, a DEK it never wrapped
        ("globex", b"\x01" * 40),  # another tenant's KEK (unknown to this key manager)
        ("acme", b"\x01"),  # a wrapped DEK the key wrap cannot even try
    ],
)
def test_a_forged_batch_envelope_fails_the_partition_never_the_connection(
    tmp_path: Path, kek: str, wrapped: bytes
) -> None:
    item = make_filter(tmp_path)
    part = fetched(item, "enc.orders", _forged_batch_envelope(kek, wrapped))
    assert part.error_code == ErrorCode.corrupt_message and not part.records


def test_a_batch_envelope_moved_to_another_topic_does_not_open(tmp_path: Path) -> None:
    """A genuine format-2 batch of ``enc.orders`` served as ``enc.payments``' (a tenant
    copying ciphertext it can read into a topic it controls, or a mis-granted replica):
    the topic is in the associated data, so it fails there and opens only at home."""
    item = make_filter(tmp_path)
    item_batch = EncryptionFilter(
        {
            "kms": {
                "backend": "file",
                "file": {"path": str(tmp_path / "keks.json")},
                "allow_development_backend": True,
            },
            "policies": [{"tenant": "*", "prefixes": ["enc."], "granularity": "batch"}],
        }
    )
    original = records_of([b"MARKER-moved", None])
    call = run_request(item_batch, produce_v9("enc.orders", original))
    sealed = bytes(call.body.topic_data[0].partition_data[0].records)
    assert b"MARKER-moved" not in sealed
    assert batchenv.envelope_of(Head(sealed)) is not None  # sealed whole: format 2
    moved = fetched(item, "enc.payments", sealed)
    assert moved.error_code == ErrorCode.corrupt_message and not moved.records
    assert bytes(fetched(item, "enc.orders", sealed).records) == original


def test_a_clear_writer_cannot_plant_a_batch_envelope_either(tmp_path: Path) -> None:
    item = other_tenants_filter(tmp_path)
    planted = records_of([b"KGE\x02\x00\x00\x04acme" + b"\x00" * 64, None])
    call = run_request(item, produce_v9("enc.shared", planted))
    assert call.rejection is not None
    code, message = call.rejection
    assert code == ErrorCode.invalid_record and "envelope" in (message or "")
