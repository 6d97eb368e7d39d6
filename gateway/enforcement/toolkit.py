"""Building blocks shared by the per-API enforcement units."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.errors import error_response
from .mirror import list_item_type, mirror
from .verdict import PASS, Verdict

TOPIC_DENIED = ErrorCode.topic_authorization_failed  # 29
GROUP_DENIED = ErrorCode.group_authorization_failed  # 30
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed  # 31
TXN_DENIED = ErrorCode.transactional_id_authorization_failed  # 53
CLUSTER_NAME = "kafka-cluster"

Code = ErrorCode | Callable[[Any], ErrorCode]


def named(**fields: Any) -> SimpleNamespace:
    """A stand-in request entry for APIs that list bare strings (group ids, keys)."""
    return SimpleNamespace(**fields)


def item_name(item: Any) -> str | None:
    for field in ("name", "topic", "topic_name", "group_id", "transactional_id", "resource_name"):
        value = getattr(item, field, None)
        if value is not None:
            return str(value)
    return None


def deny_whole(response_cls: type[Any], code: ErrorCode) -> Verdict:
    return Verdict(local=error_response(response_cls, code), denied=1)


def _code(code: Code, item: Any) -> ErrorCode:
    return code(item) if callable(code) else code


def respond_only(response_cls: type[Any], field: str, entries: Iterable[Any]) -> Any:
    base = error_response(response_cls, ErrorCode.none)
    return dataclasses.replace(base, **{field: tuple(entries)})


def split(
    request: Any,
    response_cls: type[Any],
    request_field: str,
    response_field: str,
    allowed: Callable[[Any], bool],
    code: Code,
    entries: list[Any] | None = None,
) -> Verdict:
    """Forward the allowed entries of ``request_field``; answer the rest with ``code``.

    ``entries`` overrides the request's own list (for APIs listing bare strings,
    wrapped with ``named``); the forwarded request then carries the original
    values of the allowed entries.
    """
    originals = list(getattr(request, request_field) or ())
    wrapped = entries if entries is not None else originals
    keep: list[tuple[Any, Any]] = []
    refused: list[tuple[Any, Any]] = []
    for original, entry in zip(originals, wrapped, strict=True):
        (keep if allowed(entry) else refused).append((original, entry))
    if not refused:
        return PASS
    item_cls = list_item_type(response_cls, response_field)
    denied = tuple(mirror(item_cls, entry, _code(code, entry)) for _, entry in refused)
    if not keep:
        return Verdict(local=respond_only(response_cls, response_field, denied), denied=len(denied))
    forward = dataclasses.replace(request, **{request_field: tuple(o for o, _ in keep)})

    def merge(response: Any) -> Any:
        return dataclasses.replace(
            response, **{response_field: tuple(getattr(response, response_field)) + denied}
        )

    return Verdict(forward=forward, rewritten=True, merge=merge, denied=len(denied))


def filter_response(field: str, visible: Callable[[Any], bool]) -> Verdict:
    """Forward as is; drop the response entries the principal may not see."""

    def merge(response: Any) -> Any:
        kept = tuple(entry for entry in getattr(response, field) if visible(entry))
        return dataclasses.replace(response, **{field: kept})

    return Verdict(forward=True, merge=merge)
