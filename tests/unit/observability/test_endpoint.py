"""Routing of the health and metrics endpoint, without sockets."""

from __future__ import annotations

import pytest

from gateway.observability.endpoint import BadRequest, Reply, parse_head, render, respond


def metrics() -> bytes:
    return b"kgw_requests_total 1.0\n"


def test_parse_head() -> None:
    assert parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n") == ("GET", "/metrics")
    for bad in (b"GET /metrics\r\n\r\n", b"\x16\x03\x01 garbage", b"GET / SPDY/3\r\n\r\n"):
        with pytest.raises(BadRequest):
            parse_head(bad)


def test_routes() -> None:
    assert respond("GET", "/metrics", metrics, {}).body == metrics()
    assert respond("GET", "/healthz", metrics, {}).status == 200
    assert respond("GET", "/nope", metrics, {}).status == 404
    assert respond("POST", "/metrics", metrics, {}).status == 405


def test_ready_only_when_every_check_passes() -> None:
    state = {"cluster": False}

    def broken() -> bool:
        raise RuntimeError("boom")

    checks = {"cluster": lambda: state["cluster"], "policies": lambda: True}
    reply = respond("GET", "/readyz", metrics, checks)
    assert reply.status == 503
    assert reply.body == b"cluster: not ready\npolicies: ok\n"
    state["cluster"] = True
    assert respond("GET", "/readyz", metrics, checks).status == 200
    assert respond("GET", "/readyz", metrics, {**checks, "x": broken}).status == 503


def test_render_head_only() -> None:
    reply = Reply(200, "text/plain", b"ok\n")
    assert render(reply).endswith(b"\r\n\r\nok\n")
    assert render(reply, head_only=True).endswith(
        b"Content-Length: 3\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
