"""A failed SASL login's access-log record names what the client claimed, as claimed."""

from __future__ import annotations

import json

from gateway.accesslog.records import (
    CONNECTION_FIELDS,
    ConnectionEvent,
    auth_failure_record,
    connection_record,
    rfc3339_ms,
)
from gateway.identity import ClientIdentity

T0 = 1795356003.25


def _identity() -> ClientIdentity:
    return ClientIdentity("public", "198.51.100.9", 40002)


def test_plain_failure_names_the_claimed_key_id_and_keeps_the_decided_principal() -> None:
    record = auth_failure_record(
        "gw-1", "c9", _identity(), mechanism="PLAIN", claimed="ak_7f3e", reason="wrong_secret"
    )
    assert list(record) == list(CONNECTION_FIELDS)
    assert record["principal"] == "User:ANONYMOUS"  # nobody was authenticated
    assert record["claimed"] == record["api_key_id"] == "ak_7f3e"
    assert record["sasl_mechanism"] == "PLAIN" and record["outcome"] == "failure"
    assert record["event"] == "auth" and record["reason"] == "wrong_secret"
    assert json.loads(json.dumps(record)) == record


def test_scram_failure_claims_a_user_not_a_key() -> None:
    record = auth_failure_record(
        "gw", "c1", _identity(), mechanism="SCRAM-SHA-512", claimed="alice", reason="unknown_user"
    )
    assert record["claimed"] == "alice" and record["api_key_id"] is None


def test_a_failure_before_any_name_claims_nothing() -> None:
    record = auth_failure_record(
        "gw", "c1", _identity(), mechanism="PLAIN", claimed=None, reason="plain_fields"
    )
    assert record["claimed"] is None and record["api_key_id"] is None


def test_the_documented_failed_plain_example() -> None:
    from tests.unit.accesslog.test_records import DOC

    lines = [line for line in DOC.read_text().splitlines() if '"claimed":"' in line]
    assert len(lines) == 1
    example = json.loads(lines[0])
    record = auth_failure_record(
        "gw-1", "c9", _identity(), mechanism="PLAIN", claimed="ak_7f3e", reason="wrong_secret",
        now=T0,
    )  # fmt: skip
    example["ts"] = rfc3339_ms(T0)
    assert record == example


def test_other_connection_records_claim_nothing() -> None:
    events: tuple[ConnectionEvent, ...] = ("open", "tls", "auth", "close")
    for event in events:
        record = connection_record("gw", "c1", _identity(), event)
        assert record["claimed"] is None
