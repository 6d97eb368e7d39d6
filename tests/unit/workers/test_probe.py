"""Reading a worker's HTTP reply (``gateway.workers.probe``)."""

from __future__ import annotations

from gateway.workers.probe import parse_reply


def test_a_reply_gives_its_status_and_body() -> None:
    raw = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 17\r\n\r\ncluster: not ready"
    assert parse_reply(raw) == (503, "cluster: not ready")


def test_anything_else_is_no_answer() -> None:
    for raw in (b"", b"HTTP/1.1 200 OK", b"SSH-2.0\r\n\r\n", b"HTTP/1.1 abc x\r\n\r\n"):
        assert parse_reply(raw) == (0, "")
