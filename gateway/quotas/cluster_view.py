"""The cluster's topics and partition counts, read with the gateway's own identity.

Licence checks count a tenant's topics and partitions from this view. It is read
fresh (one Metadata request for all topics, through the gateway's ``BrokerClient``:
the same TLS and SASL login as the metadata refresh) for
every CreateTopics / CreatePartitions that a plan limits, so a tenant's own
earlier creations always count; see docs/quotas.md for what it cannot see
(creations racing through another instance).
"""

from __future__ import annotations

import logging
import time

from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from ..upstream.client import BrokerClient, BrokerUnavailable

log = logging.getLogger("kgw.quotas")
RECENT_S = 30.0


class ClusterUnavailable(Exception):
    """No broker answered the topic list request; the message says why (no secrets)."""


class ClusterTopics:
    """``await fetch()``: topic name -> partition count, as a broker sees it now."""

    def __init__(self, client: BrokerClient, timeout_s: float | None = None) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self.topics: dict[str, int] = {}
        self.fetched_at: float | None = None  # time.monotonic() of the last good read
        self._recent: dict[str, tuple[int, float]] = {}  # created here: (partitions, when)

    def note(self, topic: str, partitions: int) -> None:
        """A creation through this instance that brokers may not report yet (their metadata
        trails the controller by a moment): counted for ``RECENT_S`` seconds."""
        self._recent[topic] = (partitions, time.monotonic())

    def _with_recent(self, topics: dict[str, int]) -> dict[str, int]:
        now = time.monotonic()
        for topic, (partitions, at) in list(self._recent.items()):
            if now - at > RECENT_S:
                del self._recent[topic]
            elif topics.get(topic, 0) < partitions:
                topics[topic] = partitions
        return topics

    async def fetch(self) -> dict[str, int]:
        request = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        try:
            response = await self._client.ask(request, MetadataResponse, self._timeout_s)
        except BrokerUnavailable as exc:  # OSError, timeout, SASL refusal, a bad frame
            log.warning(
                "cluster topic list unavailable",
                extra={"event": "cluster_topics_failed", "reason": exc.reason},
            )
            raise ClusterUnavailable(exc.brief) from None  # it reaches the tenant's client
        topics: dict[str, int] = {
            str(t.name): len(t.partitions) for t in response.topics if t.name and not t.is_internal
        }
        self.topics, self.fetched_at = topics, time.monotonic()
        return self._with_recent(dict(topics))
