"""The v2 record batch codec: round trips for every codec (hypothesis), the CRC, the
fields a batch must keep, and malformed input refused with a reason."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.encryption.batch import (
    Batch,
    BatchError,
    Raw,
    Record,
    encode,
    parse,
    split,
)
from gateway.encryption.compression import compress, decompress

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=10), blobs), max_size=3).map(tuple)
records = st.lists(
    st.builds(
        Record,
        offset_delta=st.integers(0, 2**31 - 1),
        timestamp_delta=st.integers(-(2**40), 2**40),
        key=blobs,
        value=blobs,
        headers=headers,
    ),
    max_size=8,
)


def batch_of(recs: list[Record], attributes: int = 0) -> Batch:
    return Batch(
        base_offset=1234,
        partition_leader_epoch=7,
        attributes=attributes,
        last_offset_delta=max(len(recs) - 1, 0),
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_500,
        producer_id=99,
        producer_epoch=3,
        base_sequence=42,
        records=recs,
    )


@settings(max_examples=60, deadline=None)
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]), flags=st.sampled_from([0, 8, 16]))
def test_round_trip_every_codec(recs: list[Record], codec: int, flags: int) -> None:
    original = batch_of(recs, codec | flags)
    data = encode(original)
    again = parse(data)
    assert again == original
    assert encode(again) == data  # deterministic for a given codec


def test_crc_covers_attributes_to_end() -> None:
    data = encode(batch_of([Record(0, 0, b"k", b"v")]))
    assert struct.unpack_from(">I", data, 17)[0] == crc32c.crc32c(data[21:])
    broken = bytearray(data)
    broken[-1] ^= 1
    with pytest.raises(BatchError, match="CRC"):
        parse(bytes(broken))


def test_header_fields_kept() -> None:
    data = encode(batch_of([Record(0, 5, None, b"v", (("h", b"x"),))], 4 | 16))
    base, length, epoch, magic = struct.unpack_from(">qiib", data)
    assert (base, length + 12, epoch, magic) == (1234, len(data), 7, 2)
    pid, pepoch, seq, count = struct.unpack_from(">qhii", data, 43)
    assert (pid, pepoch, seq, count) == (99, 3, 42, 1)


def test_split_whole_old_magic_and_truncated() -> None:
    one = encode(batch_of([Record(0, 0, None, b"a")]))
    two = encode(batch_of([Record(0, 0, None, b"b" * 50)]))
    old = bytearray(two)
    old[16] = 1
    pieces = split(one + bytes(old) + two[:40])
    assert pieces[0] == one
    assert pieces[1] == Raw(bytes(old))
    assert pieces[2] == Raw(two[:40], truncated=True)


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda d: d[:30], "shorter"),
        (lambda d: d[:16] + b"\x01" + d[17:], "magic"),
        (lambda d: d + b"x", "length"),
    ],
)
def test_malformed_refused(mutate: object, reason: str) -> None:
    data = encode(batch_of([Record(0, 0, None, b"v")]))
    with pytest.raises(BatchError, match=reason):
        parse(mutate(data))  # type: ignore[operator]


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=200_000), codec=st.sampled_from([1, 2, 3, 4]))
def test_codecs_round_trip(data: bytes, codec: int) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_raw_snappy_is_read() -> None:
    import cramjam

    assert decompress(2, bytes(cramjam.snappy.compress_raw(b"abc" * 100))) == b"abc" * 100
