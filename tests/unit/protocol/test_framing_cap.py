"""A FrameReader's limit can change between feeds (the pre-authentication cap)."""

from __future__ import annotations

import struct

import pytest

from gateway.protocol.framing import FrameError, FrameReader, frame

CAP = 512 * 1024


def test_an_oversize_prefix_is_refused_from_the_prefix_alone() -> None:
    reader = FrameReader(CAP)
    with pytest.raises(FrameError) as raised:
        reader.feed(struct.pack(">i", CAP + 1))  # no body at all
    assert raised.value.size == CAP + 1 and raised.value.limit == CAP
    assert reader.buffered == 0  # nothing of it was kept


def test_a_prefix_split_over_reads_is_refused_when_complete() -> None:
    reader = FrameReader(CAP)
    prefix = struct.pack(">i", 100 * 1024 * 1024)
    assert reader.feed(prefix[:2]) == []
    with pytest.raises(FrameError, match="exceeds the limit of 524288"):
        reader.feed(prefix[2:])


def test_a_frame_at_the_cap_passes() -> None:
    payload = b"x" * CAP
    assert FrameReader(CAP).feed(frame(payload)) == [frame(payload)]


def test_raising_the_limit_admits_larger_frames() -> None:
    reader = FrameReader(CAP)
    big = frame(b"y" * (CAP * 2))
    reader.max_frame = 100 * 1024 * 1024  # authenticated
    assert reader.max_frame == 100 * 1024 * 1024
    assert reader.feed(big[:1000]) == []
    assert reader.feed(big[1000:]) == [big]


def test_a_negative_length_has_no_limit() -> None:
    with pytest.raises(FrameError) as raised:
        FrameReader(CAP).feed(struct.pack(">i", -1))
    assert raised.value.limit is None and raised.value.size == -1
