"""A request record not built yet: what it needs, queued until a sink encodes it.

Every request answered is logged, so building its 30-field record is on the data
path of every request. Built there, one record at a time between a request's other
work, it costs several times what it costs built in a row (decision 0056): the
code and data it touches are out of the caches by the next request. So the
connection queues a ``PendingRequest`` (the sender as it is now, the finished
``Exchange``, the time) and the sink's thread builds the records of a whole batch
with ``entry_of`` just before encoding them. The record is the same as
``records.request_record`` builds from the same values, field for field.

The access log owns a queued exchange: nothing changes it after ``observer.exchange``.
A record is built once even when two sinks (file and topic) take it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from ..protocol.apis import api_name
from .exchange import Exchange
from .records import (
    REQUEST_FIELDS,
    SCHEMA_VERSION,
    WHO_FIELDS,
    Entry,
    Who,
    request_entry,
    rfc3339_ms,
)

log = logging.getLogger("kgw.accesslog")


class PendingRequest:
    """The request record of ``exchange``, answered at ``now`` (epoch s) to ``sender``."""

    __slots__ = ("_entry", "exchange", "now", "sender")

    def __init__(self, sender: Who, exchange: Exchange, now: float) -> None:
        self.sender = sender
        self.exchange = exchange
        self.now = now
        self._entry: Entry | None = None

    def entry(self) -> Entry:
        """The record (built on the first call; sinks may call from their threads, where
        two building it at once build the same dict). Never raises: built off the data
        path, a failure here would stop the sink, so a value that cannot be read or
        formatted is written as ``null`` instead, and logged."""
        entry = self._entry
        if entry is None:
            x = self.exchange
            try:
                entry = request_entry(
                    self.sender,
                    self.now,
                    x.api_key,
                    x.api_version,
                    x.correlation_id,
                    x.client_id,
                    x.resources,
                    x.decision,
                    x.rule,
                    x.error_code,
                    x.bytes_in,
                    x.bytes_out,
                    x.records,
                    x.throttle_ms,
                    x.latency_ms,
                    x.namespace,
                )
            except Exception as exc:
                entry = self._degraded(exc)
            self._entry = entry
        return entry

    def _degraded(self, error: Exception) -> Entry:
        """The record with ``null`` for every field that could not be made."""
        x = self.exchange
        entry: Entry = dict.fromkeys(REQUEST_FIELDS)
        entry.update(v=SCHEMA_VERSION, type="request", event="request")
        entry.update(zip(WHO_FIELDS, self.sender, strict=False))
        parts: dict[str, Callable[[], object]] = {
            "ts": lambda: rfc3339_ms(self.now),
            "client_id": lambda: x.client_id,
            "api": lambda: api_name(x.api_key),
            "api_version": lambda: x.api_version,
            "correlation_id": lambda: x.correlation_id,
            "topics": lambda: list(x.resources.topics),
            "groups": lambda: list(x.resources.groups),
            "transactional_ids": lambda: list(x.resources.transactional_ids),
            "partitions": lambda: x.resources.partitions,
            "decision": lambda: x.decision,
            "rule": lambda: x.rule,
            "error_code": lambda: x.error_code,
            "bytes_in": lambda: x.bytes_in,
            "bytes_out": lambda: x.bytes_out,
            "records": lambda: x.records,
            "throttle_ms": lambda: x.throttle_ms,
            "latency_ms": lambda: round(x.latency_ms, 3),
            "namespace": lambda: x.namespace,
            "denied": lambda: list(x.resources.denied),
        }
        for field, read in parts.items():
            with contextlib.suppress(Exception):
                entry[field] = read()
        log.error(
            "access-log record built with null fields: %s",
            type(error).__name__,
            extra={"event": "accesslog_record_degraded", "reason": type(error).__name__},
        )
        return entry


Queued = Entry | PendingRequest
"""What ``AccessLog.record`` takes and sinks get: a record, or one still to build."""


def entry_of(item: Queued) -> Entry:
    """The record ``item`` is or stands for."""
    return item.entry() if isinstance(item, PendingRequest) else item
