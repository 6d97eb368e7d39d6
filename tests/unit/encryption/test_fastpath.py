"""The values-only fast path (``fastpath``) against the general path (``batch.parse`` /
``batch.encode`` with a ``Record`` per record): same records after a round trip, in
both directions and across them, for records of every shape (null keys and values,
headers, lengths needing 1, 2 and 3 varint bytes, large deltas), every codec; and
malformed records are a ``BatchError``, never a crash or a wrong record."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.encryption import envelope
from gateway.encryption.batch import Batch, BatchError, Record, encode, parse
from gateway.encryption.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from gateway.encryption.envelope import KeyRef
from gateway.encryption.fastpath import Head, open_batch, seal_batch, varint, zigzag

REF = KeyRef("acme", 3, b"\x07" * 40)
AEAD = AESGCM(os.urandom(32))
TOPIC = "enc.orders"


def shapes() -> list[Record]:
    values: list[bytes | None] = [b"", b"x", b"y" * 63, b"z" * 64, b"w" * 200, None, b"v" * 20000]
    keys: list[bytes | None] = [None, b"", b"k" * 70]
    headers: list[tuple[tuple[str, bytes | None], ...]] = [(), (("h", b"1"), ("é", None))]
    out = []
    delta = 0
    for value in values:
        for key in keys:
            for head in headers:
                out.append(Record(delta, delta * 1000, key, value, head))
                delta += 37
    return out


def general_open(data: bytes) -> list[Record]:
    records = []
    for r in parse(data).records:
        if envelope.is_envelope(r.value):
            assert r.value is not None
            _ref, flags, iv_at = envelope.key_ref(r.value)
            opened = envelope.open_(AEAD, r.value, iv_at, flags, TOPIC)
            r = Record(r.offset_delta, r.timestamp_delta, r.key, opened.value, r.headers)
        records.append(r)
    return records


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_fast_seal_opens_with_the_general_path_and_back(codec: int) -> None:
    records = shapes()
    clear = encode(Batch(100, 2, codec, len(records) - 1, 5000, 9000, 42, 3, 17, records))
    sealed = seal_batch(Head(clear), AEAD, REF, TOPIC.encode())
    back = parse(sealed)
    assert (back.base_offset, back.producer_id, back.base_sequence) == (100, 42, 17)
    assert back.attributes == codec and len(back.records) == len(records)
    for before, after in zip(records, back.records, strict=True):
        assert (before.key, before.headers, before.offset_delta) == (
            after.key, after.headers, after.offset_delta,
        )  # fmt: skip
        assert (after.value is None) == (before.value is None)
        if before.value is not None:
            assert envelope.is_envelope(after.value)
            assert len(before.value) < 8 or before.value not in (after.value or b"")
    assert general_open(sealed) == records
    opened = open_batch(Head(sealed), lambda ref: AEAD, TOPIC.encode())
    assert opened == clear  # byte for byte: the general path's encoding of the same records


def test_a_batch_without_envelopes_is_returned_as_it_is() -> None:
    clear = encode(Batch(0, 0, GZIP, 1, 0, 0, -1, -1, -1, [Record(0, 0, None, b"a")] * 2))
    assert open_batch(Head(clear), lambda ref: AEAD, TOPIC.encode()) is clear


def test_envelopes_with_flags_go_to_the_general_path() -> None:
    value = envelope.seal(AEAD, REF, TOPIC, b"v", key=b"k")
    data = encode(Batch(0, 0, 0, 0, 0, 0, -1, -1, -1, [Record(0, 0, None, value)]))
    assert open_batch(Head(data), lambda ref: AEAD, TOPIC.encode()) is None


def test_another_topic_does_not_open() -> None:
    clear = encode(Batch(0, 0, 0, 0, 0, 0, -1, -1, -1, [Record(0, 0, None, b"secret")]))
    sealed = seal_batch(Head(clear), AEAD, REF, TOPIC.encode())
    with pytest.raises(envelope.EnvelopeError):
        open_batch(Head(sealed), lambda ref: AEAD, b"enc.other")


@pytest.mark.parametrize(
    "record",
    [
        b"\x14\x00\x00\x00\x03",  # negative key length (-2)
        b"\x0a\x00\x00\x00\x01\x7f",  # value length past the record
        b"\x0c\x00\x00\x00\x01\x00\x01",  # header count 1, nothing after it
        b"\x08\x00\x00\x00\x01\x00\x00",  # record length says more than it holds
        b"\x03",  # negative record length
        b"\x80\x80",  # varint runs past the end
    ],
)
def test_malformed_records_are_batch_errors(record: bytes) -> None:
    good = encode(Batch(0, 0, 0, 0, 0, 0, -1, -1, -1, [Record(0, 0, None, b"v")]))
    head = Head(good)
    head.body = record
    with pytest.raises(BatchError):
        seal_batch(head, AEAD, REF, TOPIC.encode())


def test_varints() -> None:
    for value in (0, 1, -1, 63, 64, -65, 8191, 8192, 16383, 16384, 2**31 - 1, -(2**31)):
        data = zigzag(value)
        assert varint(data, 0, len(data)) == (value, len(data))


def test_a_varint_is_never_read_past_its_end() -> None:
    data = zigzag(5) + zigzag(7)  # a byte of the next field lies past end
    with pytest.raises(BatchError, match="past the end"):
        varint(data, 1, 1)
    with pytest.raises(BatchError, match="past the end"):
        varint(b"\x80\x01", 0, 1)  # a two-byte varint cut at end
