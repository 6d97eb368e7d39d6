"""The tenant's data in the cluster: list and delete its topics (``--delete-data``).

Talks to the private cluster with the gateway's own control client
(``kafka_client.roundtrip``, kio messages), through the first upstream bootstrap
server that answers, over TLS when ``upstream.tls`` is configured.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.primitive import i32Timedelta
from kio.static.protocol import Entity

from ..config import GatewayConfig
from ..kafka_client import roundtrip
from .model import TenantError

TIMEOUT_S = 30.0
NO_TOPIC_ID = uuid.UUID(int=0)


async def _ask(config: GatewayConfig, request: Entity, response_type: type[Any]) -> Any:
    upstream = config.upstream
    tls: dict[str, Any] = {}
    if upstream.tls is not None:
        from ..tls.upstream import upstream_context

        tls = {
            "ssl": upstream_context(upstream.tls).context,
            "ssl_handshake_timeout": upstream.connect_timeout_s,
        }
    last = "no bootstrap server"
    for host, port in upstream.bootstrap_addresses():
        try:
            return await roundtrip(host, port, request, response_type, TIMEOUT_S, **tls)
        except (OSError, TimeoutError, ValueError) as exc:
            last = f"{host}:{port}: {type(exc).__name__}"
    raise TenantError(f"the cluster cannot be reached ({last})")


async def tenant_topics(config: GatewayConfig, prefix: str) -> list[str]:
    """The cluster's topics in the namespace ``prefix``."""
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    response = await _ask(config, request, MetadataResponse)
    names = (str(t.name) for t in response.topics if t.name is not None)
    return sorted(n for n in names if n.startswith(prefix) and len(n) > len(prefix))


async def delete_topics(config: GatewayConfig, names: list[str]) -> dict[str, str | None]:
    """Delete ``names``; topic → None when deleted, else the error's name."""
    if not names:
        return {}
    request = DeleteTopicsRequest(
        topics=tuple(DeleteTopicState(name=n, topic_id=NO_TOPIC_ID) for n in names),  # type: ignore[arg-type]
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=TIMEOUT_S)),
    )
    response = await _ask(config, request, DeleteTopicsResponse)
    outcome: dict[str, str | None] = {}
    for result in response.responses:
        code = result.error_code
        outcome[str(result.name)] = None if int(code) == 0 else code.name
    return outcome
