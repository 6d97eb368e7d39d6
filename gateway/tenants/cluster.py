"""The tenant's data in the cluster: list and delete its topics (``--delete-data``).

Talks to the private cluster with the gateway's own ``BrokerClient`` (kio messages),
through the first upstream bootstrap server that answers, over TLS when
``upstream.tls`` is configured and logged in as ``upstream.sasl`` when it is.
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
from ..tls.material import MaterialError
from ..upstream.client import BrokerClient, BrokerUnavailable
from ..upstream.identity import UpstreamCredentialError
from .model import TenantError

TIMEOUT_S = 30.0
NO_TOPIC_ID = uuid.UUID(int=0)


async def _ask(config: GatewayConfig, request: Entity, response_type: type[Any]) -> Any:
    try:
        client = BrokerClient.from_config(config.upstream, timeout_s=TIMEOUT_S)
    except (MaterialError, UpstreamCredentialError) as exc:  # they name the file, not the secret
        raise TenantError(f"the cluster cannot be reached: {exc}") from None
    try:
        return await client.ask(request, response_type)
    except BrokerUnavailable as exc:
        raise TenantError(f"the cluster cannot be reached ({exc.brief})") from None


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
