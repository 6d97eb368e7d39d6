"""Access-log records follow docs/access-log.md (schema v1) field for field."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from gateway.accesslog.records import (
    CONNECTION_FIELDS,
    REQUEST_FIELDS,
    Resources,
    connection_record,
    decision_of,
    request_record,
    resources_of,
    rfc3339_ms,
)
from gateway.identity import ClientIdentity
from gateway.protocol.apis import request_schema
from tests.unit.enforcement.build import from_data

DOC = Path(__file__).parents[3] / "docs" / "access-log.md"
T0 = 1795356001.123  # 2026-11-22T14:00:01.123Z


def _doc_example(kind: str) -> dict[str, object]:
    for line in DOC.read_text().splitlines():
        if line.startswith("{") and f'"type":"{kind}"' in line:
            return dict(json.loads(line))
    raise AssertionError(f"no {kind} example in {DOC}")


def _doc_fields() -> set[str]:
    fields: set[str] = set()
    for line in DOC.read_text().splitlines():
        if line.startswith("| `"):
            fields.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return fields


def test_every_documented_field_is_in_a_record_type() -> None:
    assert _doc_fields() == set(REQUEST_FIELDS) | set(CONNECTION_FIELDS)


def test_request_record_reproduces_the_documented_example() -> None:
    example = _doc_example("request")
    identity = ClientIdentity("public", "203.0.113.5", 51234, "User:a-orders")
    identity.tenant, identity.api_key_id, identity.sasl_mechanism = "tenant-a", "ak_7f3e", "PLAIN"
    record = request_record(
        "gw-1",
        "c7",
        identity,
        api_key=0,
        api_version=9,
        correlation_id=41,
        client_id="orders-svc",
        bytes_in=16384,
        bytes_out=64,
        latency_ms=2.4,
        decision="allow",
        records=100,
        resources=Resources(topics=("tenant-a.orders",), partitions=1),
        now=T0,
    )
    assert list(record) == list(REQUEST_FIELDS)
    assert record == example
    assert json.loads(json.dumps(record)) == record


def test_connection_record_reproduces_the_documented_example() -> None:
    example = _doc_example("connection")
    identity = ClientIdentity("public", "198.51.100.9", 40001, "User:b-app")
    identity.sasl_mechanism = "SCRAM-SHA-256"
    record = connection_record(
        "gw-1", "c8", identity, "auth", outcome="failure", reason="authentication failed", now=T0
    )
    assert list(record) == list(CONNECTION_FIELDS)
    example["ts"] = rfc3339_ms(T0)
    assert {k: record[k] for k in example} == example
    assert record["tenant"] is None and record["tls_version"] is None


def test_unknown_address_is_null_not_empty() -> None:
    record = connection_record("gw", "c1", ClientIdentity("public", "", 0), "open", now=T0)
    assert record["client_host"] is None and record["client_port"] is None
    assert record["principal"] == "User:ANONYMOUS"


def test_timestamps_are_rfc3339_utc_with_milliseconds() -> None:
    assert rfc3339_ms(T0) == "2026-11-22T14:00:01.123Z"
    assert rfc3339_ms(0.0005) == "1970-01-01T00:00:00.000Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rfc3339_ms())


@pytest.mark.parametrize(
    ("enforced", "denied", "forwarded", "expected"),
    [
        (False, 0, True, "none"),
        (True, 0, True, "allow"),
        (True, 2, True, "partial"),
        (True, 1, False, "deny"),
    ],
)
def test_decision(enforced: bool, denied: int, forwarded: bool, expected: str) -> None:
    assert decision_of(enforced, denied, forwarded) == expected


def _request(key: int, version: int, data: dict[str, object]) -> object:
    return from_data(request_schema(key, version), data)


def test_resources_of_produce() -> None:
    request = _request(
        0,
        9,
        {
            "transactional_id": "tx-1",
            "acks": -1,
            "timeout": 1000,
            "topic_data": [
                {"name": "a", "partition_data": [{"index": 0}, {"index": 1}]},
                {"name": "b", "partition_data": [{"index": 0}]},
            ],
        },
    )
    assert resources_of(request) == Resources(("a", "b"), (), ("tx-1",), 3)


def test_resources_of_fetch_by_topic_id() -> None:
    topic_id = uuid.uuid4()
    request = _request(
        1, 13, {"topics": [{"topic_id": str(topic_id), "partitions": [{"partition": 4}]}]}
    )
    named = resources_of(request, lambda tid: "orders" if tid == topic_id else None)
    assert named.topics == ("orders",) and named.partitions == 1
    assert resources_of(request).topics == ()


def test_resources_of_group_and_metadata_apis() -> None:
    commit = _request(
        8,
        8,
        {
            "group_id": "g1",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
        },
    )
    assert resources_of(commit) == Resources(("t",), ("g1",), (), 1)
    metadata = _request(3, 12, {"topics": [{"name": "x"}, {"name": "y"}]})
    assert resources_of(metadata) == Resources(("x", "y"), (), (), None)
    assert resources_of(_request(3, 12, {"topics": None})) == Resources()
    deletes = _request(20, 5, {"topic_names": ["old", "older"]})
    assert resources_of(deletes).topics == ("old", "older")
    describe = _request(15, 5, {"groups": ["g1", "g2"]})
    assert resources_of(describe).groups == ("g1", "g2")


def test_request_and_connection_records_say_the_same_about_who() -> None:
    """``request_record`` spells the identity fields out for speed: they must stay those
    ``connection_record`` takes from ``_identity_fields``, value for value."""
    identity = ClientIdentity("public", "198.51.100.4", 40100, "User:alice")
    identity.tenant, identity.api_key_id, identity.sasl_mechanism = "acme", "ak_1", "PLAIN"
    who = ("instance", "conn", "listener", "client_host", "client_port", "principal")
    who += ("tenant", "api_key_id", "sasl_mechanism")
    connection = connection_record("gw", "c1", identity, "auth", outcome="success", now=T0)
    request = request_record(
        "gw",
        "c1",
        identity,
        api_key=0,
        api_version=9,
        correlation_id=1,
        client_id="x",
        bytes_in=10,
        bytes_out=5,
        latency_ms=1.0,
        now=T0,
    )
    assert {k: request[k] for k in who} == {k: connection[k] for k in who}
    assert connection["tenant"] == "acme" and request["sasl_mechanism"] == "PLAIN"
