"""The access log (schema v1, docs/access-log.md): records, queue, writer, sinks.

| module | concern | I/O |
| --- | --- | --- |
| ``settings`` | the ``accesslog`` configuration section | none |
| ``records`` | building request and connection records; resources of a request | none |
| ``exchange`` | what one request/response pair was, filled as it goes | none |
| ``counting`` | record counts and error codes from raw frames or decoded entities | none |
| ``pending`` | a request's record queued unbuilt (``PendingRequest``), built by the sink | none |
| ``writer`` | ``AccessLog``: bounded queues, drop counting, backpressure, writer tasks | asyncio |
| ``files`` | rotating JSON-lines files (the default sink), on a thread | writes files |
| ``topic`` | producing records to a topic on the backend cluster (``BrokerClient``) | asyncio |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exchange import Exchange, begin, complete
from .records import (
    Decision,
    Resources,
    connection_record,
    decision_of,
    default_instance,
    request_record,
    resources_of,
)
from .settings import AccessLogConfig, AccessLogTopicConfig
from .sink import Sink
from .writer import AccessLog, SinkStats

if TYPE_CHECKING:
    from ..upstream.client import BrokerClient

__all__ = [
    "AccessLog",
    "AccessLogConfig",
    "AccessLogTopicConfig",
    "Decision",
    "Exchange",
    "Resources",
    "SinkStats",
    "begin",
    "build_access_log",
    "complete",
    "connection_record",
    "decision_of",
    "default_instance",
    "request_record",
    "resources_of",
]


def build_access_log(
    config: AccessLogConfig, client: BrokerClient | None = None
) -> AccessLog | None:
    """The configured access log (None when disabled).

    ``client`` is the gateway's broker client (upstream TLS and SASL login), needed
    only with ``topic``.
    """
    if not config.enabled:
        return None
    sinks: list[Sink] = []
    sizes: dict[str, int] = {}
    if config.path is not None:
        from .files import FileSink

        sinks.append(FileSink(config.path, config.max_bytes, config.max_files))
    if config.topic is not None:
        from .topic import TopicSink

        if client is None:
            raise ValueError("accesslog.topic needs the gateway's broker client")
        topic = config.topic
        sinks.append(
            TopicSink(
                topic.name,
                client,
                acks=topic.acks,
                timeout_s=topic.timeout_s,
                batch_max_bytes=topic.batch_max_bytes,
            )
        )
        if topic.queue_size is not None:
            sizes["topic"] = topic.queue_size
    return AccessLog(
        sinks,
        config.queue_size,
        config.on_full,
        config.report_interval_s,
        sizes,
        batch_delay_s=config.batch_delay_ms / 1000,
    )
