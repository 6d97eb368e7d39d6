"""FrameAssembler behind a real BufferedProtocol on loopback, with asyncio's loop and uvloop:
frames of every size come out whole and in order however the sender splits them."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from gateway.protocol.framing import Frame, FrameAssembler, FrameError, frame

LIMIT = 4 * 1024 * 1024


class _Reader(asyncio.BufferedProtocol):
    def __init__(self, expected: int, limit: int = LIMIT) -> None:
        self.assembler = FrameAssembler(limit)
        self.frames: list[bytes] = []
        self.kinds: set[type] = set()
        self.expected = expected
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.assembler.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            got: list[Frame] = self.assembler.received(nbytes)
        except FrameError as exc:
            if not self.done.done():
                self.done.set_exception(exc)
            return
        for item in got:
            self.kinds.add(type(item))
            self.frames.append(bytes(item))
        if len(self.frames) >= self.expected and not self.done.done():
            self.done.set_result(None)


async def _exchange(payload: bytes, expected: int, seed: int, limit: int = LIMIT) -> _Reader:
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)

    async def send(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        position = 0
        while position < len(payload):
            step = rng.choice([1, 3, 700, 16_000, 70_000, 600_000])
            writer.write(payload[position : position + step])
            position += step
            if rng.random() < 0.3:
                await writer.drain()
                await asyncio.sleep(0)
        await writer.drain()

    server = await asyncio.start_server(send, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader = _Reader(expected, limit)
        transport, _ = await loop.create_connection(lambda: reader, "127.0.0.1", port)
        try:
            await asyncio.wait_for(reader.done, 30)
        finally:
            transport.close()
    finally:
        server.close()
        await server.wait_closed()
    return reader


def _loops() -> list[tuple[str, Callable[[], asyncio.AbstractEventLoop]]]:
    import uvloop

    return [("asyncio", asyncio.new_event_loop), ("uvloop", uvloop.new_event_loop)]


@pytest.mark.parametrize("name,factory", _loops(), ids=lambda v: v if isinstance(v, str) else "")
def test_frames_of_every_size_come_out_whole_and_in_order(
    name: str, factory: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    rng = random.Random(7)
    sizes = [rng.choice([0, 5, 200, 8_000, 9_000, 40_000, 2_000_000]) for _ in range(40)]
    frames = [frame(rng.randbytes(size)) for size in sizes]
    loop = factory()
    try:
        reader = loop.run_until_complete(_exchange(b"".join(frames), len(frames), seed=11))
    finally:
        loop.close()
    assert reader.frames == frames
    assert memoryview in reader.kinds  # the large ones are read into buffers of their own
    assert reader.assembler.buffered == 0


@pytest.mark.parametrize("name,factory", _loops(), ids=lambda v: v if isinstance(v, str) else "")
def test_an_oversize_frame_fails_the_read_before_its_body(
    name: str, factory: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    big = frame(b"x" * 5000)
    loop = factory()
    try:
        with pytest.raises(FrameError, match="exceeds the limit of 1000"):
            loop.run_until_complete(_exchange(frame(b"ok") + big, 3, seed=3, limit=1000))
    finally:
        loop.close()
