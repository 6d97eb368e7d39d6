import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.framing import FrameError, FrameReader, frame


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=10),
)
def test_frames_survive_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(max_frame=1024)
    out: list[bytes] = []
    position, index = 0, 0
    while position < len(stream):
        step = cuts[index % len(cuts)]
        out.extend(reader.feed(stream[position : position + step]))
        position += step
        index += 1
    assert [f[4:] for f in out] == payloads
    assert reader.buffered == 0


def test_negative_length_is_refused() -> None:
    with pytest.raises(FrameError, match="negative"):
        FrameReader(1024).feed(struct.pack(">i", -5))


def test_oversize_length_is_refused_before_buffering() -> None:
    reader = FrameReader(1024)
    with pytest.raises(FrameError, match="exceeds the limit"):
        reader.feed(struct.pack(">i", 1025) + b"x")


def test_partial_frame_waits_for_more() -> None:
    reader = FrameReader(1024)
    assert reader.feed(struct.pack(">i", 4) + b"ab") == []
    assert reader.feed(b"cd") == [struct.pack(">i", 4) + b"abcd"]
