"""The topic sink's record batches are valid v2 batches (CRC32C checked by kio's reader)."""

from __future__ import annotations

import datetime

from kio.records.readers import read_batch

from gateway.accesslog.topic import BATCH_OVERHEAD, encode_batch, split_lines


def test_encoded_batch_reads_back_with_its_checksum() -> None:
    now = datetime.datetime(2026, 11, 22, 14, 0, 1, tzinfo=datetime.UTC)
    data = encode_batch([b'{"n":0}', b'{"n":1}', b'{"n":2}'], now)
    batch, size = read_batch(data, 0)  # raises on a CRC mismatch
    assert size == len(data)
    assert [r.value for r in batch.records] == [b'{"n":0}', b'{"n":1}', b'{"n":2}']
    assert [int(r.offset) for r in batch.records] == [0, 1, 2]
    assert all(r.key is None for r in batch.records)
    assert batch.base_timestamp == int(now.timestamp() * 1000)


def test_lines_are_split_into_batches_within_the_limit() -> None:
    lines = [b"x" * 100] * 50
    groups, too_large = split_lines(lines, 1024)
    assert too_large == 0
    assert sum(len(g) for g in groups) == 50
    assert all(BATCH_OVERHEAD + sum(len(x) + 12 for x in g) <= 1024 for g in groups)
    assert all(len(encode_batch(g)) <= 1024 for g in groups)


def test_a_line_too_large_for_any_batch_is_counted() -> None:
    groups, too_large = split_lines([b"a", b"b" * 5000, b"c"], 1024)
    assert too_large == 1
    assert groups == [[b"a", b"c"]]
