"""Length-prefixed Kafka framing with no I/O.

``FrameReader.feed(bytes)`` returns whole frames, each still carrying its
4-byte size prefix so a forwarded frame is written out unchanged. A negative
or oversize length raises ``FrameError`` as soon as the 4-byte prefix is in,
before any of the frame's body is buffered: the peer broke the protocol and the
connection must be closed. ``max_frame`` may change between feeds (the network
layer caps frames lower until SASL authentication succeeds); a frame is checked
against the limit in force when its prefix is read.

``FrameAssembler`` does the same for an ``asyncio.BufferedProtocol``: the socket is
read straight into the buffers it hands out, and a frame that does not arrive whole
in one read gets a buffer of its own, of its announced size, that the kernel fills
with the rest; the frame is that buffer, copied nowhere on the way (decision 0050).
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

# A frame: bytes, or (a large one ``FrameAssembler`` read into a buffer of its own) a
# read-only view of that buffer; read-only, as kio's decoders want.
Frame = bytes | memoryview


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame (remote's fault).

    ``size`` is the announced length; ``limit`` is set when it was too large.
    """

    def __init__(self, message: str, size: int, limit: int | None = None) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


def _frame_size(source: bytes | bytearray | memoryview, position: int, limit: int) -> int:
    """The length announced at ``position``; ``FrameError`` if negative or over ``limit``."""
    size: int = _SIZE.unpack_from(source, position)[0]
    if size < 0:
        raise FrameError(f"negative frame length {size}", size)
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {limit}", size, limit)
    return size


class FrameReader:
    """Accumulates bytes and cuts them into frames of at most ``max_frame`` bytes."""

    __slots__ = ("_buffer", "_max_frame")

    def __init__(self, max_frame: int) -> None:
        self._buffer = bytearray()
        self._max_frame = max_frame

    @property
    def max_frame(self) -> int:
        return self._max_frame

    @max_frame.setter
    def max_frame(self, value: int) -> None:
        self._max_frame = value

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | memoryview) -> list[bytes]:
        """The whole frames ``data`` completes. ``data`` may be a view of a buffer that
        is reused after this call (TLS): whatever is kept of it is copied."""
        if self._buffer:
            self._buffer += data
            frames, used = self._cut(self._buffer)
            if used == len(self._buffer):
                self._buffer = bytearray()
            elif used:
                del self._buffer[:used]
            return frames
        # Nothing pending: cut whole frames straight from ``data`` (one copy each, none
        # when the read is exactly one frame) and keep only the tail.
        frames, used = self._cut(data)
        if used < len(data):
            self._buffer += memoryview(data)[used:]
        return frames

    def _cut(self, source: bytes | bytearray | memoryview) -> tuple[list[bytes], int]:
        frames: list[bytes] = []
        position = 0
        available = len(source)
        view = memoryview(source)
        try:
            while available - position >= 4:
                size = _frame_size(source, position, self._max_frame)
                end = position + 4 + size
                if end > available:
                    break
                if position == 0 and end == available and isinstance(source, bytes):
                    frames.append(source)
                else:
                    frames.append(bytes(view[position:end]))
                position = end
        finally:
            view.release()
        return frames, position


class FrameAssembler:
    """Frames read into the buffers ``buffer()`` hands out, for ``BufferedProtocol``.

    Small frames are read, several at a time, into a scratch area and cut from it (one
    copy of each, as ``FrameReader``). A frame of over ``own_from`` bytes still
    incomplete after a read gets a ``bytearray`` of exactly its size: what arrived of
    it is copied in once, the rest is read into it, and it is returned as a read-only
    view of that buffer.
    ``FrameError`` as ``FrameReader`` raises it, before any buffer for the frame exists.
    """

    __slots__ = (
        "_end",
        "_filled",
        "_frame",
        "_own_from",
        "_scratch",
        "_start",
        "_view",
        "max_frame",
    )  # fmt: skip

    def __init__(self, max_frame: int, scratch: int = 16 * 1024) -> None:
        self.max_frame = max_frame
        self._scratch = bytearray(scratch)
        self._view = memoryview(self._scratch)
        self._start = self._end = 0  # the unconsumed bytes are scratch[start:end]
        self._frame: bytearray | None = None  # a large frame being read into its own buffer
        self._filled = 0
        self._own_from = scratch // 2

    @property
    def buffered(self) -> int:
        """Bytes read and not yet returned as frames."""
        return self._filled if self._frame is not None else self._end - self._start

    def buffer(self) -> memoryview:
        """Where the next read goes (never empty)."""
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        return self._view[self._end :]

    def received(self, count: int) -> list[Frame]:
        """``count`` bytes were read into the last ``buffer()``: the frames now whole."""
        frame = self._frame
        if frame is not None:
            self._filled += count
            if self._filled < len(frame):
                return []
            self._frame = None
            return [memoryview(frame).toreadonly()]
        self._end += count
        return self._cut()

    def feed(self, data: bytes | memoryview) -> list[Frame]:
        """Bytes that were not read through ``buffer()`` (a replayed answer), as if they were."""
        frames: list[Frame] = []
        view = memoryview(data)
        with view:
            while view:
                target = self.buffer()
                count = min(len(target), len(view))
                target[:count] = view[:count]
                target.release()
                view = view[count:]
                frames += self.received(count)
        return frames

    def _cut(self) -> list[Frame]:
        frames: list[Frame] = []
        scratch, view = self._scratch, self._view
        start, end = self._start, self._end
        while end - start >= 4:
            size = _frame_size(scratch, start, self.max_frame)
            stop = start + 4 + size
            if stop <= end:
                frames.append(bytes(view[start:stop]))
                start = stop
                continue
            if 4 + size > self._own_from:
                frame = bytearray(4 + size)
                frame[: end - start] = view[start:end]
                self._frame, self._filled = frame, end - start
                start = end
            break
        if start == end:
            self._start = self._end = 0
        elif len(scratch) - end < self._own_from:  # room for the rest of a small frame
            scratch[: end - start] = view[start:end]
            self._start, self._end = 0, end - start
        else:
            self._start = start
        return frames


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
