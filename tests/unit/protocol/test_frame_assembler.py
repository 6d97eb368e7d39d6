"""FrameAssembler: frames read into the buffers it hands out (BufferedProtocol)."""

from __future__ import annotations

import random
import struct

import pytest

from gateway.protocol.framing import FrameAssembler, FrameError, frame

LIMIT = 8 * 1024 * 1024


def _read(assembler: FrameAssembler, stream: bytes, chunks: random.Random) -> list[bytes]:
    """Deliver ``stream`` as a socket would: each read at most what ``buffer()`` offers."""
    out: list[bytes] = []
    position = 0
    while position < len(stream):
        target = assembler.buffer()
        assert len(target) > 0
        count = min(len(target), len(stream) - position, chunks.randint(1, 300_000))
        target[:count] = stream[position : position + count]
        target.release()
        position += count
        out += [bytes(item) for item in assembler.received(count)]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_any_split_of_any_mix_of_sizes_gives_the_frames_back_in_order(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.choice([0, 1, 7, 100, 3000, 8191, 8192, 9000, 70_000, 1_100_000])
             for _ in range(60)]  # fmt: skip
    frames = [frame(rng.randbytes(size)) for size in sizes]
    assembler = FrameAssembler(LIMIT)
    assert _read(assembler, b"".join(frames), rng) == frames
    assert assembler.buffered == 0


def test_a_large_frame_is_the_buffer_the_socket_was_read_into() -> None:
    assembler = FrameAssembler(LIMIT)
    big = frame(b"z" * 1_000_000)
    first = assembler.buffer()
    first[:5000] = big[:5000]
    first.release()
    assert assembler.received(5000) == []
    rest = assembler.buffer()
    owner = rest.obj
    assert len(rest) == len(big) - 5000  # exactly the rest of the frame: no over-read
    rest[:] = big[5000:]
    rest.release()
    (done,) = assembler.received(len(big) - 5000)
    assert done.obj is owner and done.readonly and done == big


def test_small_frames_share_reads_and_the_scratch_is_reused() -> None:
    assembler = FrameAssembler(LIMIT, scratch=1024)
    small = [frame(bytes([n]) * 90) for n in range(30)]
    stream = b"".join(small)
    # reads of 250 bytes: frames cut across reads stay in the scratch (none of them large)
    got: list[bytes | bytearray] = []
    for start in range(0, len(stream), 250):
        piece = stream[start : start + 250]
        target = assembler.buffer()
        assert len(target) >= len(piece)
        target[: len(piece)] = piece
        target.release()
        got += assembler.received(len(piece))
    assert got == small and all(type(item) is bytes for item in got)


def test_an_oversize_prefix_is_refused_before_any_buffer_for_it() -> None:
    assembler = FrameAssembler(1024)
    prefix = struct.pack(">i", 1025)
    with pytest.raises(FrameError) as raised:
        assembler.feed(prefix)
    assert raised.value.size == 1025 and raised.value.limit == 1024
    assert len(assembler.buffer()) <= 16 * 1024  # no buffer of the announced size was made


def test_a_negative_length_is_refused() -> None:
    with pytest.raises(FrameError, match="negative frame length"):
        FrameAssembler(LIMIT).feed(struct.pack(">i", -5) + b"abcd")


def test_a_split_prefix_is_judged_when_complete_and_the_limit_may_change() -> None:
    assembler = FrameAssembler(100)
    big = frame(b"q" * 5000)
    assert assembler.feed(big[:2]) == []
    assembler.max_frame = 10_000
    assert assembler.feed(big[2:]) == [big]


def test_feed_takes_bytes_that_were_not_read_through_it() -> None:
    frames = [frame(b"a" * 10), frame(b"b" * 20_000), frame(b"")]
    assembler = FrameAssembler(LIMIT)
    joined = b"".join(frames)
    assert assembler.feed(joined[:7]) + assembler.feed(joined[7:]) == frames
