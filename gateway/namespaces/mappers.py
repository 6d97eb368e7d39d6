"""Per-API request and response mappers: a kio message in the tenant's names to one in
the cluster's names and back. Pure; ``table.NAMED_APIS`` says which fields.

``map_request`` raises ``NameRefused`` for what cannot be mapped safely (an illegal
topic name, a topic id the tenant cannot be shown to own, a pattern that could escape
the namespace); the filter answers it as an error. ``map_response`` leaves out every
entry naming another tenant's resource and rewrites broker error messages.
"""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from .names import NameRefused, Namespace
from .paths import Tree, compile_paths, message_paths, rename
from .table import NAMED_APIS, NAMED_CONFIG_RESOURCES

__all__ = ["NameRefused", "map_request", "map_response"]
_ZERO_ID = uuid.UUID(int=0)
CREATE_TOPICS, DELETE_TOPICS, LIST_TRANSACTIONS = 19, 20, 66
CONFIG_APIS = frozenset({32, 33, 44})
WILDCARD = "*"  # Kafka's LITERAL wildcard resource name
PATTERN_ANY, PATTERN_LITERAL, PREFIXED = 1, 3, 4  # Kafka's PatternType codes


@cache
def _request_tree(key: int) -> Tree:
    return compile_paths(NAMED_APIS[key].request)


@cache
def _response_tree(key: int) -> Tree:
    return compile_paths(NAMED_APIS[key].response)


@cache
def _messages(cls: Any) -> Tree:
    return compile_paths(message_paths(cls))


def map_request(ns: Namespace, key: int, body: Any) -> Any:
    """``body`` (a request of API ``key`` in the tenant's names) in cluster-side names."""
    if key not in NAMED_APIS:
        raise NameRefused(f"api {key} is not offered with transparent namespaces")
    if key == CREATE_TOPICS:
        out = rename(body, _request_tree(key), ns.topic_to_cluster)
    else:
        out = rename(body, _request_tree(key), ns.to_cluster)
    special = _REQUEST_SPECIAL.get(key)
    return out if special is None else special(ns, out)


def map_response(ns: Namespace, key: int, body: Any) -> Any:
    """``body`` (a broker's response) as the tenant sees it: its own names only."""
    out = rename(body, _response_tree(key), ns.to_tenant)
    special = _RESPONSE_SPECIAL.get(key)
    if special is not None:
        out = special(ns, out)
    kind: Any = type(body)
    messages = _messages(kind)
    if messages:
        out = rename(out, messages, ns.strip_message)  # never None for a string
    return out


# -- what the paths alone cannot say ------------------------------------------


def _delete_topics_request(ns: Namespace, body: Any) -> Any:
    for entry in getattr(body, "topics", None) or ():
        if entry.name is None and entry.topic_id not in (None, _ZERO_ID):
            raise NameRefused("deleting a topic by id is not offered; name the topic")
    return body


def _config_resources(rename_name: Callable[[str], str | None]) -> Callable[[Any], Any]:
    def one(entry: Any) -> Any:
        if int(entry.resource_type) not in NAMED_CONFIG_RESOURCES:
            return entry
        mapped = rename_name(entry.resource_name)
        return None if mapped is None else dataclasses.replace(entry, resource_name=mapped)

    return one


def _configs_request(ns: Namespace, body: Any) -> Any:
    one = _config_resources(ns.to_cluster)
    return dataclasses.replace(body, resources=tuple(one(r) for r in body.resources))


def _configs_response(ns: Namespace, body: Any) -> Any:
    field = "results" if hasattr(body, "results") else "responses"
    one = _config_resources(ns.to_tenant)
    kept = [m for m in (one(r) for r in getattr(body, field)) if m is not None]
    return dataclasses.replace(body, **{field: tuple(kept)})


def _acl_wildcard(ns: Namespace, entry: Any, name_field: str, pattern_field: str) -> Any:
    """The tenant's wildcard ``*`` (LITERAL, or ANY with that name) is all of its
    namespace: PREFIXED ``<prefix>`` on the cluster, shown back as ``*``
    (``enforcement/acl_admin.py``). Other names were mapped by the table's paths."""
    if getattr(entry, name_field) != ns.to_cluster(WILDCARD):
        return entry
    if int(getattr(entry, pattern_field)) not in (PATTERN_ANY, PATTERN_LITERAL):
        return entry
    return dataclasses.replace(entry, **{name_field: ns.prefix, pattern_field: i8(PREFIXED)})


def _describe_acls_request(ns: Namespace, body: Any) -> Any:
    return _acl_wildcard(ns, body, "resource_name_filter", "pattern_type_filter")


def _create_acls_request(ns: Namespace, body: Any) -> Any:
    creations = tuple(
        _acl_wildcard(ns, c, "resource_name", "resource_pattern_type") for c in body.creations
    )
    return dataclasses.replace(body, creations=creations)


def _delete_acls_request(ns: Namespace, body: Any) -> Any:
    filters = tuple(
        _acl_wildcard(ns, f, "resource_name_filter", "pattern_type_filter") for f in body.filters
    )
    return dataclasses.replace(body, filters=filters)


def _list_transactions_request(ns: Namespace, body: Any) -> Any:
    pattern = getattr(body, "transactional_id_pattern", None)
    if not pattern:  # absent or empty: every id, the answer is filtered
        return body
    return dataclasses.replace(body, transactional_id_pattern=ns.regex_to_cluster(pattern))


def _heartbeat_request(ns: Namespace, body: Any) -> Any:
    pattern = getattr(body, "subscribed_topic_regex", None)
    if not pattern:  # null: unchanged since the last heartbeat; "": none
        return body
    return dataclasses.replace(body, subscribed_topic_regex=ns.regex_to_cluster(pattern))


def _group_describe_response(ns: Namespace, body: Any) -> Any:
    def member(entry: Any) -> Any:
        regex = entry.subscribed_topic_regex
        if not regex:
            return entry
        return dataclasses.replace(entry, subscribed_topic_regex=ns.regex_to_tenant(regex))

    groups = tuple(
        dataclasses.replace(g, members=tuple(member(m) for m in g.members)) for g in body.groups
    )
    return dataclasses.replace(body, groups=groups)


def _metadata_response(ns: Namespace, body: Any) -> Any:
    """A topic asked for by id that is not shown to the tenant (no name in the answer)
    is an id that does not exist, as on a private cluster: "not authorized" would say
    that another tenant's topic has this id."""
    hidden = ErrorCode.topic_authorization_failed
    if not any(t.name is None and t.error_code == hidden for t in body.topics):
        return body
    topics = tuple(
        dataclasses.replace(t, error_code=ErrorCode.unknown_topic_id)
        if t.name is None and t.error_code == hidden
        else t
        for t in body.topics
    )
    return dataclasses.replace(body, topics=topics)


def _topic_partitions_request(ns: Namespace, body: Any) -> Any:
    """A listing of all topics starts at the namespace: from the cluster's first topic,
    the brokers would count the partitions sorting before it against the limit, and
    how many of its own came back would tell their number."""
    if body.topics or body.cursor is not None:
        return body
    cursor_cls = sys.modules[type(body).__module__].Cursor  # kio: the request's module
    return dataclasses.replace(body, cursor=cursor_cls(topic_name=ns.prefix, partition_index=0))


def _topic_partitions_response(ns: Namespace, body: Any) -> Any:
    cursor = body.next_cursor
    if cursor is None:
        return body
    name = ns.to_tenant(cursor.topic_name)
    if name is None:  # the brokers' next topic is another tenant's: the listing ends here
        return dataclasses.replace(body, next_cursor=None)
    return dataclasses.replace(body, next_cursor=dataclasses.replace(cursor, topic_name=name))


_REQUEST_SPECIAL: dict[int, Callable[[Namespace, Any], Any]] = {
    DELETE_TOPICS: _delete_topics_request,
    29: _describe_acls_request,
    30: _create_acls_request,
    31: _delete_acls_request,
    32: _configs_request,
    33: _configs_request,
    44: _configs_request,
    LIST_TRANSACTIONS: _list_transactions_request,
    68: _heartbeat_request,
    75: _topic_partitions_request,
}
_RESPONSE_SPECIAL: dict[int, Callable[[Namespace, Any], Any]] = {
    3: _metadata_response,
    32: _configs_response,
    33: _configs_response,
    44: _configs_response,
    69: _group_describe_response,
    75: _topic_partitions_response,
}
