"""Request records built late (``accesslog.pending``) are the records built at once."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from gateway.accesslog.exchange import Exchange, begin, complete
from gateway.accesslog.files import FileSink, encode_line
from gateway.accesslog.pending import PendingRequest, entry_of
from gateway.accesslog.records import REQUEST_FIELDS, Resources, request_record, who
from gateway.accesslog.writer import AccessLog
from gateway.identity import ClientIdentity
from gateway.observability import ConnectionObserver, GatewayMetrics
from gateway.protocol.apis import response_schema
from gateway.protocol.codec import encode_response
from gateway.protocol.errors import error_response
from tests.unit.accesslog.test_counting import produce_frame

T0 = 1795356001.123  # 2026-11-22T14:00:01.123Z


def _identity() -> ClientIdentity:
    identity = ClientIdentity("public", "198.51.100.4", 40100, "User:alice")
    identity.tenant, identity.api_key_id, identity.sasl_mechanism = "acme", "ak_1", "PLAIN"
    return identity


def _exchange() -> Exchange:
    exchange = begin(produce_frame(9, [[4, 2]]), arrived=10.0)
    exchange.decision, exchange.rule = "partial", "deny User:alice WRITE TOPIC:t1"
    exchange.resources = Resources(("t0", "t1"), (), ("txn-1",), 2)
    exchange.throttle_ms, exchange.namespace = 120, "acme."
    reply = encode_response(0, 9, 7, error_response(response_schema(0, 9), ErrorCode.none))
    return complete(exchange, reply, done=10.0125)


def test_a_pending_request_is_the_record_request_record_builds() -> None:
    identity, exchange = _identity(), _exchange()
    pending = PendingRequest(who("gw", "c1", identity), exchange, T0)
    expected = request_record(
        "gw",
        "c1",
        identity,
        api_key=exchange.api_key,
        api_version=exchange.api_version,
        correlation_id=exchange.correlation_id,
        client_id=exchange.client_id,
        bytes_in=exchange.bytes_in,
        bytes_out=exchange.bytes_out,
        latency_ms=exchange.latency_ms,
        decision=exchange.decision,
        rule=exchange.rule,
        error_code=exchange.error_code,
        records=exchange.records,
        throttle_ms=exchange.throttle_ms,
        resources=exchange.resources,
        now=T0,
        namespace=exchange.namespace,
    )
    entry = entry_of(pending)
    assert entry == expected and list(entry) == list(REQUEST_FIELDS)
    assert entry["topics"] == ["t0", "t1"] and entry["records"] == 8
    assert entry["latency_ms"] == 12.5 and entry["ts"] == "2026-11-22T14:00:01.123Z"
    assert encode_line(pending) == encode_line(expected)
    assert entry_of(expected) is expected  # a built record passes as it is


def test_the_record_names_the_sender_as_it_was_when_the_answer_left() -> None:
    identity = ClientIdentity("public", "198.51.100.4", 40100)
    observer = ConnectionObserver(_ListLog(), None, "gw", "c1", identity)  # type: ignore[arg-type]
    observer.exchange(_exchange(), now=T0)
    identity.principal, identity.tenant = "User:bob", "other"  # e.g. SASL, later
    observer.exchange(_exchange(), now=T0)
    first, second = (entry_of(item) for item in observer.access_log.items)  # type: ignore[union-attr]
    assert (first["principal"], first["tenant"]) == ("User:ANONYMOUS", None)
    assert (second["principal"], second["tenant"]) == ("User:bob", "other")


def test_a_record_is_built_once_for_every_sink_and_thread() -> None:
    pending = PendingRequest(who("gw", "c1", _identity()), _exchange(), T0)
    built: list[dict[str, object]] = []
    threads = [threading.Thread(target=lambda: built.append(pending.entry())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(entry == built[0] for entry in built)
    assert pending.entry() is pending.entry()


def test_an_unfinished_exchange_is_timed_when_it_is_recorded() -> None:
    log = _ListLog()
    observer = ConnectionObserver(log, None, "gw", "c1", _identity())  # type: ignore[arg-type]
    exchange = begin(produce_frame(9, [[1]]))
    assert exchange.done is None
    observer.exchange(exchange)
    done = exchange.done
    assert done is not None
    assert entry_of(log.items[0])["latency_ms"] == round(exchange.latency_ms, 3)
    assert exchange.done == done  # building the record later does not move it


def test_metrics_count_requests_with_and_without_an_access_log() -> None:
    for access_log in (None, _ListLog()):
        metrics = GatewayMetrics()
        observer = ConnectionObserver(access_log, metrics, "gw", "c1", _identity())  # type: ignore[arg-type]
        assert observer.exchange(_exchange())
        labels = {"api": "produce", "tenant": "acme"}
        get = metrics.sample_value
        assert get("kgw_requests_total", labels) == 1
        assert get("kgw_denied_requests_total", labels) == 1  # "partial"
        assert get("kgw_records_total", labels) == 8


async def test_the_file_sink_writes_pending_requests_as_records(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    access = AccessLog([FileSink(path, 1 << 20, 2)], queue_size=100)
    writer = asyncio.create_task(access.run())
    pending = PendingRequest(who("gw", "c1", _identity()), _exchange(), T0)
    assert access.record(pending)
    await access.close()
    await writer
    assert path.read_bytes() == encode_line(entry_of(pending))


class _ListLog:
    """The part of ``AccessLog`` the observer uses, keeping what it is given."""

    def __init__(self) -> None:
        self.items: list[object] = []

    def record(self, entry: object) -> bool:
        self.items.append(entry)
        return True


def test_a_value_that_breaks_the_record_is_written_as_null_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exchange = _exchange()
    exchange.resources = None  # type: ignore[assignment]  # a bug elsewhere, say
    pending = PendingRequest(who("gw", "c1", _identity()), exchange, T0)
    with caplog.at_level(logging.ERROR, logger="kgw.accesslog"):
        entry = entry_of(pending)
    assert list(entry) == list(REQUEST_FIELDS)
    assert entry["topics"] is None and entry["partitions"] is None
    assert (entry["api"], entry["records"], entry["principal"]) == ("produce", 8, "User:alice")
    assert entry["ts"] == "2026-11-22T14:00:01.123Z" and entry["latency_ms"] == 12.5
    assert [r.event for r in caplog.records] == ["accesslog_record_degraded"]  # type: ignore[attr-defined]
    assert encode_line(pending).endswith(b"\n")
