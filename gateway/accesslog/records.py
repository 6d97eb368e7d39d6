"""Access-log records, schema version 1 (docs/access-log.md), built from plain values.

Pure functions: the network layer and the session hand in what they know and get
a flat ``dict`` ready for ``AccessLog.record``. Every key of a record type is
always present (``None`` where it does not apply), so Spark sees one schema.
Nothing secret is a parameter here: an API key *id* may be logged, never its
secret, and ``reason`` texts are the gateway's own words.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

from ..identity import ClientIdentity
from ..protocol.apis import api_name

SCHEMA_VERSION = 1
Decision = Literal["allow", "deny", "partial", "none"]
ConnectionEvent = Literal["open", "tls", "auth", "close"]
Outcome = Literal["success", "failure"]
Entry = dict[str, Any]

REQUEST_FIELDS = (
    "v", "ts", "type", "event", "instance", "conn", "listener", "client_host", "client_port",
    "principal", "tenant", "api_key_id", "sasl_mechanism", "client_id", "api", "api_version",
    "correlation_id", "topics", "groups", "transactional_ids", "partitions", "decision", "rule",
    "error_code", "bytes_in", "bytes_out", "records", "throttle_ms", "latency_ms", "namespace",
    "denied",
)  # fmt: skip
WHO_FIELDS = REQUEST_FIELDS[4:13]  # the connection's part of a request record (``who``)
CONNECTION_FIELDS = (
    "v", "ts", "type", "event", "instance", "conn", "listener", "client_host", "client_port",
    "tls_version", "tls_cipher", "cert_subject", "principal", "tenant", "api_key_id",
    "sasl_mechanism", "outcome", "reason", "claimed",
)  # fmt: skip


def default_instance() -> str:
    """The gateway instance name when none is configured: the host name."""
    return socket.gethostname() or "gateway"


_second_cache: list[tuple[int, str]] = [(-1, "")]


def rfc3339_ms(epoch_s: float | None = None) -> str:
    """``2026-11-22T14:00:01.123Z`` for ``epoch_s`` (now by default)."""
    now = time.time() if epoch_s is None else epoch_s
    millis = int(now * 1000)
    second, fraction = divmod(millis, 1000)
    cached_second, prefix = _second_cache[0]
    if second != cached_second:  # strftime is slow: once per second
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_cache[0] = (second, prefix)
    return f"{prefix}.{fraction:03d}Z"


@dataclasses.dataclass(frozen=True, slots=True)
class Resources:
    """The resources a request named (``partitions``: None when the API names none)."""

    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    partitions: int | None = None
    denied: tuple[str, ...] = ()  # what authorization refused: "topic:<name>", "group:<id>"…


NO_RESOURCES = Resources()


def with_denied(resources: Resources, denied: list[str]) -> Resources:
    """``resources`` with what authorization refused of them (each once, in order)."""
    return dataclasses.replace(resources, denied=tuple(dict.fromkeys(denied)))


def decision_of(enforced: bool, denied_parts: int, forwarded: bool) -> Decision:
    """``none`` without authorization; ``allow``; ``partial`` when some parts were denied
    and the rest went to a broker; ``deny`` when all of it was refused."""
    if not enforced:
        return "none"
    if denied_parts == 0:
        return "allow"
    return "partial" if forwarded else "deny"


def _identity_fields(instance: str, conn: str, identity: ClientIdentity) -> Entry:
    return dict(zip(WHO_FIELDS, who(instance, conn, identity), strict=True))


Who = tuple[str, str, str, str | None, int | None, str, str | None, str | None, str | None]
"""The connection's part of a request record, in ``REQUEST_FIELDS`` order: instance,
conn, listener, client_host, client_port, principal, tenant, api_key_id, sasl_mechanism."""


def who(instance: str, conn: str, identity: ClientIdentity) -> Who:
    """``identity`` as it is now, for the records of requests answered now (it changes
    at TLS and SASL, and a record must say who sent the request, not who came later)."""
    return (
        instance,
        conn,
        identity.listener,
        identity.host or None,
        identity.port or None,
        identity.principal,
        # Filled by authentication once it lands; absent attributes read as unknown.
        getattr(identity, "tenant", None),
        getattr(identity, "api_key_id", None),
        getattr(identity, "sasl_mechanism", None),
    )


def request_record(
    instance: str,
    conn: str,
    identity: ClientIdentity,
    *,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    bytes_in: int,
    bytes_out: int,
    latency_ms: float,
    decision: Decision = "none",
    rule: str | None = None,
    error_code: int = 0,
    records: int | None = None,
    throttle_ms: int = 0,
    resources: Resources = NO_RESOURCES,
    now: float | None = None,
    namespace: str | None = None,
) -> Entry:
    """One request/response pair; ``now`` (epoch seconds) is when the response left.
    ``namespace``: the prefix of a namespaced tenant (its names are the recorded
    cluster-side names without it); ``null`` for everyone else."""
    return request_entry(
        who(instance, conn, identity),
        time.time() if now is None else now,
        api_key,
        api_version,
        correlation_id,
        client_id,
        resources,
        decision,
        rule,
        error_code,
        bytes_in,
        bytes_out,
        records,
        throttle_ms,
        latency_ms,
        namespace,
    )


def request_entry(
    sender: Who,
    now: float,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    resources: Resources,
    decision: Decision,
    rule: str | None,
    error_code: int,
    bytes_in: int,
    bytes_out: int,
    records: int | None,
    throttle_ms: int,
    latency_ms: float,
    namespace: str | None,
) -> Entry:
    """``request_record`` from plain values, positionally: what the writer calls for
    every queued request (``pending.PendingRequest``), so one dict display serves both."""
    instance, conn, listener, host, port, principal, tenant, key_id, mechanism = sender
    return {
        "v": SCHEMA_VERSION,
        "ts": rfc3339_ms(now),
        "type": "request",
        "event": "request",
        "instance": instance,
        "conn": conn,
        "listener": listener,
        "client_host": host,
        "client_port": port,
        "principal": principal,
        "tenant": tenant,
        "api_key_id": key_id,
        "sasl_mechanism": mechanism,
        "client_id": client_id,
        "api": api_name(api_key),
        "api_version": api_version,
        "correlation_id": correlation_id,
        "topics": list(resources.topics),
        "groups": list(resources.groups),
        "transactional_ids": list(resources.transactional_ids),
        "partitions": resources.partitions,
        "decision": decision,
        "rule": rule,
        "error_code": error_code,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "records": records,
        "throttle_ms": throttle_ms,
        "latency_ms": round(latency_ms, 3),
        "namespace": namespace,
        "denied": list(resources.denied),
    }


def connection_record(
    instance: str,
    conn: str,
    identity: ClientIdentity,
    event: ConnectionEvent,
    *,
    outcome: Outcome | None = None,
    reason: str | None = None,
    now: float | None = None,
) -> Entry:
    """A connection event: ``open``, ``tls`` (handshake), ``auth`` (SASL), ``close``."""
    entry: Entry = {"v": SCHEMA_VERSION, "ts": rfc3339_ms(now), "type": "connection"}
    entry["event"] = event
    entry.update(_identity_fields(instance, conn, identity))
    entry.update(
        tls_version=identity.tls_version,
        tls_cipher=identity.tls_cipher,
        cert_subject=identity.cert_subject,
        outcome=outcome,
        reason=reason,
        claimed=None,
    )
    return {key: entry[key] for key in CONNECTION_FIELDS}


def auth_failure_record(
    instance: str,
    conn: str,
    identity: ClientIdentity,
    *,
    mechanism: str,
    claimed: str | None,
    reason: str | None,
    now: float | None = None,
) -> Entry:
    """A failed SASL authentication. ``principal`` stays what the gateway decided
    (``User:ANONYMOUS``, or the certificate's); ``claimed`` is the name the client
    claimed (PLAIN: the API key id, SCRAM: the user name, GSSAPI: the Kerberos name),
    never verified and already bounded and sanitized by the mechanism; with PLAIN it is
    also the record's ``api_key_id``. ``sasl_mechanism`` is the mechanism tried."""
    entry = connection_record(
        instance, conn, identity, "auth", outcome="failure", reason=reason, now=now
    )
    entry.update(sasl_mechanism=mechanism, claimed=claimed)
    if mechanism == "PLAIN":
        entry["api_key_id"] = claimed
    return entry


# -- resources named by a decoded request -----------------------------------------

_GROUP_FIELDS = frozenset({"group_id", "groups", "group_ids"})
_TXN_FIELDS = frozenset({"transactional_id", "transactional_ids"})
_TOPIC_CONTAINERS = ("topic",)  # field names containing this hold topic entities
_PARTITION_FIELDS = frozenset({"partitions", "partition_data", "partition_indexes"})


class _Collector:
    def __init__(self, topic_name: Callable[[Any], str | None] | None) -> None:
        self.topic_name = topic_name
        self.topics: dict[str, None] = {}
        self.groups: dict[str, None] = {}
        self.txns: dict[str, None] = {}
        self.partitions: int | None = None

    def _add_partitions(self, count: int) -> None:
        self.partitions = (self.partitions or 0) + count

    def _names(self, target: dict[str, None], value: Any) -> None:
        items: Iterable[Any] = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, str) and item:
                target[item] = None

    def _topic(self, entity: Any) -> None:
        name = getattr(entity, "name", None) or getattr(entity, "topic", None)
        if not isinstance(name, str):
            topic_id = getattr(entity, "topic_id", None)
            name = self.topic_name(topic_id) if topic_id and self.topic_name else None
        if isinstance(name, str) and name:
            self.topics[name] = None

    def walk(self, entity: Any, in_topic: bool = False) -> None:
        if in_topic:
            self._topic(entity)
        for field in dataclasses.fields(entity):
            name = field.name
            value = getattr(entity, name)
            if name in _GROUP_FIELDS:
                self._names(self.groups, value)
            elif name in _TXN_FIELDS:
                self._names(self.txns, value)
            elif in_topic and name in _PARTITION_FIELDS and isinstance(value, tuple):
                self._add_partitions(len(value))
            elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
                topical = any(part in name for part in _TOPIC_CONTAINERS)
                for item in value:
                    self.walk(item, in_topic=topical)
            elif "topic" in name and isinstance(value, tuple) and value:
                self._names(self.topics, value)  # e.g. DeleteTopics' topic_names


def resources_of(request: Any, topic_name: Callable[[Any], str | None] | None = None) -> Resources:
    """Topics, groups, transactional ids and the partition count a decoded request names.

    Generic over kio's request classes: entities in an array field whose name
    contains ``topic`` are topics (named by ``name``/``topic``, or by ``topic_id``
    through ``topic_name``); their ``partitions``/``partition_data``/
    ``partition_indexes`` arrays count partitions. Names keep first-seen order.
    """
    collector = _Collector(topic_name)
    collector.walk(request)
    return Resources(
        tuple(collector.topics),
        tuple(collector.groups),
        tuple(collector.txns),
        collector.partitions,
    )


def produce_resources(request: Any) -> Resources:
    """``resources_of`` a decoded Produce request, without the generic walk (Produce is
    the API logged at the highest rate): its transactional id, its topics by name in
    first-seen order and its partition count. Topics named by id (v13) go the
    generic way."""
    topics: dict[str, None] = {}
    partitions: int | None = None
    for topic in request.topic_data:
        name = getattr(topic, "name", None)
        if not isinstance(name, str):
            return resources_of(request)
        if name:
            topics[name] = None
        partitions = (partitions or 0) + len(topic.partition_data)
    txn = request.transactional_id
    return Resources(tuple(topics), (), (txn,) if isinstance(txn, str) and txn else (), partitions)
