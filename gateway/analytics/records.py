"""Access-log records of schema v1 (``docs/access-log.md``), built as plain dicts.

The simulator writes these; ``FIELDS`` is the column order of converted Parquet.
"""

from __future__ import annotations

import datetime
from typing import Any

SCHEMA_VERSION = 1
FIELDS = (
    "v",
    "ts",
    "type",
    "event",
    "instance",
    "conn",
    "listener",
    "client_host",
    "client_port",
    "tls_version",
    "tls_cipher",
    "cert_subject",
    "principal",
    "tenant",
    "api_key_id",
    "sasl_mechanism",
    "client_id",
    "api",
    "api_version",
    "correlation_id",
    "topics",
    "groups",
    "transactional_ids",
    "partitions",
    "decision",
    "rule",
    "error_code",
    "bytes_in",
    "bytes_out",
    "records",
    "throttle_ms",
    "latency_ms",
    "denied",
    "outcome",
    "reason",
    "claimed",
)
API_VERSIONS = {
    "produce": 9,
    "fetch": 13,
    "metadata": 12,
    "offset_commit": 8,
    "offset_fetch": 8,
    "heartbeat": 4,
    "find_coordinator": 4,
    "join_group": 9,
    "list_offsets": 7,
    "api_versions": 3,
    "describe_configs": 4,
}
TOPIC_AUTHORIZATION_FAILED = 29


def rfc3339_ms(epoch_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def parse_rfc3339(text: str) -> float:
    """Epoch seconds from ``2026-11-22T14:00:01.123Z`` (or a date, or an offset)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    moment = datetime.datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _base(epoch_ms: int, kind: str, event: str, instance: str, conn: str) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(FIELDS)
    record.update(
        v=SCHEMA_VERSION,
        ts=rfc3339_ms(epoch_ms),
        type=kind,
        event=event,
        instance=instance,
        conn=conn,
        listener="public",
    )
    return record


def connection_record(
    epoch_ms: int,
    event: str,
    *,
    instance: str,
    conn: str,
    host: str,
    port: int,
    principal: str | None = None,
    tenant: str | None = None,
    mechanism: str | None = None,
    api_key_id: str | None = None,
    outcome: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    record = _base(epoch_ms, "connection", event, instance, conn)
    record.update(client_host=host, client_port=port, outcome=outcome, reason=reason)
    if event == "tls":
        record.update(tls_version="TLSv1.3", tls_cipher="TLS_AES_128_GCM_SHA256")
    if event in ("auth", "close") and principal:
        record.update(
            principal=principal, tenant=tenant, sasl_mechanism=mechanism, api_key_id=api_key_id
        )
    return record


def request_record(
    epoch_ms: int,
    *,
    instance: str,
    conn: str,
    host: str,
    port: int,
    principal: str,
    tenant: str,
    mechanism: str,
    api_key_id: str | None,
    client_id: str,
    api: str,
    correlation_id: int,
    topics: list[str],
    groups: list[str],
    decision: str,
    bytes_in: int,
    bytes_out: int,
    records: int | None,
    throttle_ms: int,
    latency_ms: float,
) -> dict[str, Any]:
    record = _base(epoch_ms, "request", "request", instance, conn)
    denied = decision == "deny"
    record.update(
        client_host=host,
        client_port=port,
        principal=principal,
        tenant=tenant,
        api_key_id=api_key_id,
        sasl_mechanism=mechanism,
        client_id=client_id,
        api=api,
        api_version=API_VERSIONS.get(api, 0),
        correlation_id=correlation_id,
        topics=topics,
        groups=groups,
        transactional_ids=[],
        partitions=len(topics),
        decision=decision,
        rule="no ALLOW rule matched" if denied else None,
        error_code=TOPIC_AUTHORIZATION_FAILED if denied else 0,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        records=records,
        throttle_ms=throttle_ms,
        latency_ms=latency_ms,
        denied=[f"topic:{t}" for t in topics] if denied else [],
    )
    return record
