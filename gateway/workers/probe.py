"""A minimal HTTP/1.1 GET to a worker's private loopback endpoint (the supervisor's only
client: no keep-alive, one request, the status code and the body)."""

from __future__ import annotations

import asyncio
import contextlib

MAX_BODY = 64 * 1024 * 1024


def parse_reply(raw: bytes) -> tuple[int, str]:
    """``(status, body)`` of a complete HTTP/1.x reply; ``(0, "")`` if it is not one."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        return 0, ""
    return int(parts[1]), body.decode("utf-8", errors="replace")


async def http_get(port: int, path: str, timeout_s: float) -> tuple[int, str]:
    """GET ``path`` on 127.0.0.1:``port``; ``(0, "")`` when the worker does not answer."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode("ascii"))
            raw = await reader.read(MAX_BODY)
            while chunk := await reader.read(MAX_BODY):
                raw += chunk
    except (OSError, TimeoutError):
        return 0, ""
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return parse_reply(raw)
