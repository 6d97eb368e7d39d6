"""Length-prefixed Kafka framing with no I/O.

``FrameReader.feed(bytes)`` returns whole frames, each still carrying its
4-byte size prefix so a forwarded frame is written out unchanged. A negative
or oversize length raises ``FrameError``: the peer broke the protocol and the
connection must be closed.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame (remote's fault)."""


class FrameReader:
    """Accumulates bytes and cuts them into frames of at most ``max_frame`` bytes."""

    __slots__ = ("_buffer", "_max_frame", "_need")

    def __init__(self, max_frame: int) -> None:
        self._buffer = bytearray()
        self._max_frame = max_frame
        self._need = -1  # size of the frame being collected, -1 while unknown

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        position = 0
        available = len(buffer)
        while True:
            if self._need < 0:
                if available - position < 4:
                    break
                (size,) = _SIZE.unpack_from(buffer, position)
                if size < 0:
                    raise FrameError(f"negative frame length {size}")
                if size > self._max_frame:
                    raise FrameError(
                        f"frame of {size} bytes exceeds the limit of {self._max_frame}"
                    )
                self._need = size
            if available - position < 4 + self._need:
                break
            end = position + 4 + self._need
            frames.append(bytes(buffer[position:end]))
            position = end
            self._need = -1
        if position:
            del buffer[:position]
        return frames


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
