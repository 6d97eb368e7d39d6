"""A tiny HTTP/1.1 server for ``/metrics``, ``/healthz`` and ``/readyz``.

Routing (``respond``) is pure; ``ObservabilityServer`` only reads one request
head per connection (bounded in size and time), writes the answer and closes.
GET and HEAD only, no keep-alive, no request bodies: enough for Prometheus,
load-balancer health checks and ``curl``. It binds to loopback by default.

``/healthz`` answers 200 while the process runs its event loop. ``/readyz``
answers 200 only when every readiness check passes (the lead passes
"cluster reachable" and "policies loaded"), 503 otherwise, naming each check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST

log = logging.getLogger("kgw.metrics")
MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 5.0
TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS[503] = "Service Unavailable"

ReadyChecks = Mapping[str, Callable[[], bool]]


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes


class BadRequest(Exception):
    """The client sent something that is not an HTTP/1.x request head."""


def parse_head(head: bytes) -> tuple[str, str]:
    """``(method, path)`` of a request head (query string removed)."""
    line, _, _ = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("not an HTTP/1.x request line")
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("request line is not ASCII") from None
    return method, target.split("?", 1)[0]


def readiness(checks: ReadyChecks) -> Reply:
    lines = []
    ready = True
    for name, check in checks.items():
        try:
            ok = bool(check())
        except Exception:  # a broken check means not ready, never a crash
            ok = False
        ready = ready and ok
        lines.append(f"{name}: {'ok' if ok else 'not ready'}")
    body = ("\n".join(lines) + "\n").encode()
    return Reply(200 if ready else 503, TEXT, body)


def respond(method: str, path: str, metrics: Callable[[], bytes], checks: ReadyChecks) -> Reply:
    if path not in ("/metrics", "/healthz", "/readyz"):
        return Reply(404, TEXT, b"not found: try /metrics, /healthz or /readyz\n")
    if method not in ("GET", "HEAD"):
        return Reply(405, TEXT, b"only GET and HEAD\n")
    if path == "/metrics":
        return Reply(200, CONTENT_TYPE_LATEST, metrics())
    if path == "/healthz":
        return Reply(200, TEXT, b"ok\n")
    return readiness(checks)


def render(reply: Reply, head_only: bool = False) -> bytes:
    reason = _REASONS.get(reply.status, "")
    head = (
        f"HTTP/1.1 {reply.status} {reason}\r\n"
        f"Content-Type: {reply.content_type}\r\n"
        f"Content-Length: {len(reply.body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return head if head_only else head + reply.body


class ObservabilityServer:
    """Serves the endpoints on ``bind_host:port`` (port 0: any free one, see ``port``)."""

    def __init__(
        self,
        bind_host: str,
        port: int,
        metrics: Callable[[], bytes],
        checks: ReadyChecks | None = None,
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.bind_host = bind_host
        self.port = port
        self.metrics = metrics
        self.checks: ReadyChecks = checks or {}
        self.refresh = refresh  # awaited before /metrics is answered (the workers' supervisor)
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self.bind_host, self.port, reuse_address=True, limit=MAX_HEAD_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info(
            "metrics endpoint listening",
            extra={"event": "metrics_listening", "host": self.bind_host, "port": self.port},
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            if len(head) > MAX_HEAD_BYTES:
                raise BadRequest("request head too large")
            method, path = parse_head(head)
            if path == "/metrics" and self.refresh is not None:
                await self.refresh()
            reply = respond(method, path, self.metrics, self.checks)
            writer.write(render(reply, head_only=method == "HEAD"))
        except BadRequest as exc:
            writer.write(render(Reply(400, TEXT, f"{exc}\n".encode())))
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError):
            pass  # too long, cut short or too slow: just close
        except Exception:
            log.exception("metrics request failed", extra={"event": "metrics_internal"})
        finally:
            with contextlib.suppress(OSError):
                await writer.drain()
            writer.close()
