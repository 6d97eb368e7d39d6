"""kio messages of DescribeClientQuotas (48) and AlterClientQuotas (49) to and from
``kafka_entities``' plain data; any version kio knows (the nested entity classes are
taken from the response class's own module). No I/O.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from .kafka_entities import AlterEntry, ClientQuotaError, DescribedEntry, Entity, FilterComponent
from .kafka_entities import QuotaOp as Op

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
CLIENT_QUOTA_APIS = frozenset({DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS})


def describe_filter(request: Any) -> tuple[list[FilterComponent], bool]:
    """``(components, strict)`` of a DescribeClientQuotasRequest."""
    components = [
        FilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components
    ]
    return components, bool(request.strict)


def describe_response(
    rc: type[Any], result: Sequence[DescribedEntry] | ClientQuotaError, throttle_ms: int = 0
) -> Any:
    """The DescribeClientQuotasResponse (class ``rc``) for entries or a filter error."""
    module = importlib.import_module(rc.__module__)
    throttle = datetime.timedelta(milliseconds=throttle_ms)
    if isinstance(result, ClientQuotaError):
        return rc(
            throttle_time=throttle,
            error_code=ErrorCode(result.code),
            error_message=result.message,
            entries=(),
        )
    entries = tuple(
        module.EntryData(
            entity=_entity(module, entry.entity),
            values=tuple(module.ValueData(key=k, value=v) for k, v in entry.values.items()),
        )
        for entry in result
    )
    return rc(
        throttle_time=throttle, error_code=ErrorCode.none, error_message=None, entries=entries
    )


def alter_entries(request: Any) -> tuple[list[AlterEntry], bool]:
    """``(entries, validate_only)`` of an AlterClientQuotasRequest."""
    entries: list[AlterEntry] = []
    for entry in request.entries:
        entity: Entity = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        ops = [Op(op.key, float(op.value), bool(op.remove)) for op in entry.ops]
        entries.append((entity, ops))
    return entries, bool(request.validate_only)


def alter_response(
    rc: type[Any], results: Sequence[tuple[Entity, int, str | None]], throttle_ms: int = 0
) -> Any:
    """The AlterClientQuotasResponse (class ``rc``), one entry per request entry."""
    module = importlib.import_module(rc.__module__)
    entries = tuple(
        module.EntryData(
            error_code=ErrorCode(code),
            error_message=message,
            entity=_entity(module, entity),
        )
        for entity, code, message in results
    )
    return rc(throttle_time=datetime.timedelta(milliseconds=throttle_ms), entries=entries)


def _entity(module: Any, entity: Entity) -> tuple[Any, ...]:
    return tuple(module.EntityData(entity_type=t, entity_name=n) for t, n in entity)
