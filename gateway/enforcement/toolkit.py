"""Building blocks shared by the per-API enforcement units."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol import refusal
from ..protocol.errors import error_response
from .mirror import list_item_type, mirror
from .verdict import PASS, Deferred, Verdict

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


def deny_whole(
    response_cls: type[Any], code: ErrorCode, request: Any = None, message: str | None = None
) -> Verdict:
    """Refuse all of ``request`` as a broker would: ``code`` at the top level and on every
    entry it named (``protocol.refusal``); without ``request``, at the top level only."""
    return Verdict(local=refusal.refuse(request, response_cls, code, message), denied=1)


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
    message: Callable[[Any], str | None] | None = None,
) -> Verdict:
    """Forward the allowed entries of ``request_field``; answer the rest with ``code``.

    ``entries`` overrides the request's own list (for APIs listing bare strings,
    wrapped with ``named``); the forwarded request then carries the original
    values of the allowed entries. ``message`` gives a refused entry's
    ``error_message`` where the response has one.
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
    denied = tuple(_refusal(item_cls, entry, _code(code, entry), message) for _, entry in refused)
    if not keep:
        return Verdict(local=respond_only(response_cls, response_field, denied), denied=len(denied))
    forward = dataclasses.replace(request, **{request_field: tuple(o for o, _ in keep)})

    def merge(response: Any) -> Any:
        return dataclasses.replace(
            response, **{response_field: tuple(getattr(response, response_field)) + denied}
        )

    return Verdict(forward=forward, rewritten=True, merge=merge, denied=len(denied))


def _refusal(
    item_cls: type[Any], entry: Any, code: ErrorCode, message: Callable[[Any], str | None] | None
) -> Any:
    refused = mirror(item_cls, entry, code)
    if message is None or not any(f.name == "error_message" for f in dataclasses.fields(item_cls)):
        return refused
    return dataclasses.replace(refused, error_message=message(entry))


def filter_response(field: str, visible: Callable[[Any], bool]) -> Verdict:
    """Forward as is; drop the response entries the principal may not see."""

    def merge(response: Any) -> Any:
        kept = tuple(entry for entry in getattr(response, field) if visible(entry))
        return dataclasses.replace(response, **{field: kept})

    return Verdict(forward=True, merge=merge)


def chain(outer: Verdict, inner: Verdict) -> Verdict:
    """``inner`` decided about what ``outer`` forwards: one verdict doing both.

    ``outer`` forwards (its ``merge`` adds the entries it refused); ``inner`` may
    refuse more entries, answer the rest locally, or defer its decision."""
    if inner.defer is not None:
        deferred = inner.defer

        def finish(outcome: Any) -> Verdict:
            return chain(outer, deferred.finish(outcome))

        return dataclasses.replace(inner, defer=Deferred(deferred.name, deferred.run, finish))
    denied = outer.denied + inner.denied
    if inner.local is not None:
        local = inner.local if outer.merge is None else outer.merge(inner.local)
        return Verdict(local=local, denied=denied)
    if not inner.rewritten and inner.merge is None:
        return outer if not inner.denied else dataclasses.replace(outer, denied=denied)
    merge = _compose(outer.merge, inner.merge)
    forward = inner.forward if inner.rewritten else outer.forward
    rewritten = inner.rewritten or outer.rewritten
    return Verdict(forward=forward, rewritten=rewritten, merge=merge, denied=denied)


def _compose(outer: Callable[[Any], Any] | None, inner: Callable[[Any], Any] | None) -> Any:
    if outer is None:
        return inner
    if inner is None:
        return outer
    first, then = inner, outer
    return lambda response: then(first(response))
