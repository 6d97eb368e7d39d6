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

from .exchange import Exchange
from .records import Entry, Who, request_entry


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
        two building it at once build the same dict)."""
        entry = self._entry
        if entry is None:
            x = self.exchange
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
            self._entry = entry
        return entry


Queued = Entry | PendingRequest
"""What ``AccessLog.record`` takes and sinks get: a record, or one still to build."""


def entry_of(item: Queued) -> Entry:
    """The record ``item`` is or stands for."""
    return item.entry() if isinstance(item, PendingRequest) else item
