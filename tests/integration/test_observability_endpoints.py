"""The metrics and health endpoint over real HTTP on 127.0.0.1, scraped like Prometheus."""

from __future__ import annotations

import asyncio
import contextlib
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gateway.accesslog import build_access_log
from gateway.accesslog.exchange import Exchange
from gateway.accesslog.records import Resources
from gateway.accesslog.settings import AccessLogConfig
from gateway.identity import ClientIdentity
from gateway.observability import (
    ConnectionObserver,
    GatewayMetrics,
    MetricsConfig,
    ObservabilityServer,
    serve,
)


class State:
    cluster = False
    policies = True


@contextlib.asynccontextmanager
async def endpoint() -> AsyncIterator[tuple[ObservabilityServer, GatewayMetrics]]:
    """The server runs on the test's own event loop (an async fixture would get another)."""
    metrics = GatewayMetrics()
    checks = {"cluster": lambda: State.cluster, "policies": lambda: State.policies}
    server = serve(MetricsConfig(port=0), metrics, checks)
    await server.start()
    try:
        yield server, metrics
    finally:
        server.close()


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


async def get(server: ObservabilityServer, path: str, method: str = "GET") -> Any:
    return await asyncio.to_thread(_get, f"http://127.0.0.1:{server.port}{path}", method)


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_health_and_readiness() -> None:
    async with endpoint() as (server, _):
        await _health_and_readiness(server)


async def _health_and_readiness(server: ObservabilityServer) -> None:
    assert (await get(server, "/healthz"))[0] == 200
    State.cluster = False
    status, _, body = await get(server, "/readyz")
    assert (status, body) == (503, b"cluster: not ready\npolicies: ok\n")
    State.cluster = True
    assert (await get(server, "/readyz"))[0] == 200
    State.policies = False
    assert (await get(server, "/readyz"))[0] == 503
    State.policies = True
    assert (await get(server, "/missing"))[0] == 404
    assert (await get(server, "/metrics", "POST"))[0] == 405
    status, headers, body = await get(server, "/metrics", "HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


async def test_scraped_figures_match_the_traffic(tmp_path: Path) -> None:
    async with endpoint() as (server, metrics):
        await _scraped_figures_match_the_traffic(server, metrics, tmp_path)


async def _scraped_figures_match_the_traffic(
    server: ObservabilityServer, metrics: GatewayMetrics, tmp_path: Path
) -> None:
    access = build_access_log(AccessLogConfig(path=tmp_path / "access.log", queue_size=10_000))
    assert access is not None
    metrics.watch_access_log(access.stats)
    writer = asyncio.create_task(access.run())
    identity = ClientIdentity("public", "127.0.0.1", 50000, "User:alice")
    sent = {"produce": (0, 25, 4096, 10), "fetch": (1, 40, 120, 7)}
    observer = ConnectionObserver(access, metrics, "gw-test", "c1", identity)
    for _api, (key, count, size, records) in sent.items():
        for i in range(count):  # as the gateway records a finished exchange
            exchange = Exchange(key, 9, i, "cli", size, 0.0, records=records, bytes_out=64)
            exchange.decision = "deny" if i % 5 == 0 else "allow"
            exchange.resources = Resources(topics=("t",), partitions=1)
            exchange.done = 0.0015
            observer.exchange(exchange)
    metrics.connection_opened("public")
    await access.close()
    await writer

    status, headers, body = await get(server, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    found = samples(body)
    for api, (_key, count, size, records) in sent.items():
        labels = (("api", api), ("tenant", "unknown"))
        assert found[("kgw_requests_total", labels)] == count
        assert found[("kgw_request_bytes_total", labels)] == count * size
        assert found[("kgw_records_total", labels)] == count * records
        assert found[("kgw_denied_requests_total", labels)] == count // 5
        assert found[("kgw_request_latency_seconds_count", (("api", api),))] == count
    assert found[("kgw_open_connections", (("listener", "public"),))] == 1
    assert found[("kgw_accesslog_written_total", (("sink", "file"),))] == 65
    assert len((tmp_path / "access.log").read_text().splitlines()) == 65


async def test_garbage_gets_400_and_a_closed_connection() -> None:
    async with endpoint() as (server, _):
        await _garbage(server)


async def _garbage(server: ObservabilityServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"\x16\x03\x01\x00\x05hello\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 10_000 + b"\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert answer == b""  # an oversized head is cut off, not answered
