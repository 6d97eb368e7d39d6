"""Length-prefixed Kafka framing with no I/O.

``FrameReader.feed(bytes)`` returns whole frames, each still carrying its
4-byte size prefix so a forwarded frame is written out unchanged. A negative
or oversize length raises ``FrameError`` as soon as the 4-byte prefix is in,
before any of the frame's body is buffered: the peer broke the protocol and the
connection must be closed. ``max_frame`` may change between feeds (the network
layer caps frames lower until SASL authentication succeeds); a frame is checked
against the limit in force when its prefix is read.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame (remote's fault).

    ``size`` is the announced length; ``limit`` is set when it was too large.
    """

    def __init__(self, message: str, size: int, limit: int | None = None) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


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
                (size,) = _SIZE.unpack_from(source, position)
                if size < 0:
                    raise FrameError(f"negative frame length {size}", size)
                if size > self._max_frame:
                    limit = self._max_frame
                    raise FrameError(
                        f"frame of {size} bytes exceeds the limit of {limit}", size, limit
                    )
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


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
