"""Kafka's ClientQuotas APIs answered by the gateway from its own quota store.

With quotas configured, DescribeClientQuotas (48) and AlterClientQuotas (49) never
reach a broker: ``kafka-configs.sh --bootstrap-server <gateway> --entity-type users``
reads and changes the gateway's quotas. Authorization stays with the units in
``enforcement.units`` (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster); these functions only
run for requests it allowed. Describe answers at once from the engine's settings;
Alter is a ``Deferred``: the store write runs in a worker thread (the network layer
awaits it), and a failing store gives every entry an error, never a stall.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..enforcement.verdict import Deferred, Verdict
from .kafka_entities import UNKNOWN_SERVER_ERROR, ClientQuotaError
from .kafka_messages import (
    alter_entries,
    alter_response,
    describe_filter,
    describe_response,
)

if TYPE_CHECKING:
    from .engine import QuotaEngine
    from .kafka_entities import Entity

log = logging.getLogger("kgw.quotas")


def describe(request: Any, rc: type[Any], engine: QuotaEngine) -> Verdict:
    """DescribeClientQuotas over the engine's current settings."""
    components, strict = describe_filter(request)
    try:
        result: Any = engine.describe_client_quotas(components, strict)
    except ClientQuotaError as exc:
        result = exc
    return Verdict(local=describe_response(rc, result))


def alter(request: Any, rc: type[Any], engine: QuotaEngine, actor: str) -> Verdict:
    """AlterClientQuotas: a store write attributed to ``actor``, run off the event loop."""
    entries, validate_only = alter_entries(request)

    async def run() -> list[tuple[Entity, int, str | None]]:
        return await engine.alter_client_quotas(entries, actor, validate_only)

    def finish(outcome: Any) -> Verdict:
        if isinstance(outcome, BaseException):
            reason = f"the quota store did not answer ({type(outcome).__name__})"
            results = [(entity, UNKNOWN_SERVER_ERROR, reason) for entity, _ in entries]
        else:
            results = outcome
        failed = [message for _, code, message in results if code == UNKNOWN_SERVER_ERROR]
        if failed:
            log.warning(
                "quota change through AlterClientQuotas failed: %s",
                failed[0],
                extra={
                    "event": "quota_change_failed",
                    "principal": actor,
                    "reason": failed[0],
                    "count": len(failed),
                },
            )
        return Verdict(local=alter_response(rc, results))

    return Verdict(defer=Deferred("alter-client-quotas", run, finish))
