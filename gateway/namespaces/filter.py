"""The namespace filter: tenant-side names to cluster-side names on the way in, back
on the way out. It is the first filter of the chain (``runtime.gateway`` puts it
before the record-encryption filter and the operators' filters), so on a request
every other filter, authorization, quotas, the access log and the audit trail see
cluster-side names, and on a response it runs last, after all of them.

It also narrows what ApiVersions offers a namespaced connection (``advertise``): only
the APIs ``table`` maps, at the versions it maps; before authentication, when the
tenant is not known yet, a listener the namespaces apply to offers only those too
(fail closed).

The ACL APIs are offered only when the gateway answers them itself from its policy
(``acls_local``: authorization is configured): their request names are mapped here,
and the answer is confined to the namespace where it is made (``enforcement/
acl_admin.py``, given the prefix by the authorization stage). Forwarded to brokers,
a null filter could not be confined, so they are not offered then.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ..filters.api import BaseFilter, FilterContext, RequestCall, ResponseCall
from ..protocol.apis import ApiSpec
from .directory import Directory
from .groups import (
    CONSUMER,
    GROUP_APIS,
    JOIN_GROUP,
    SYNC_GROUP,
    map_request_blobs,
    map_response_blobs,
)
from .mappers import map_request, map_response
from .names import NameRefused, Namespace
from .table import ACL_APIS, NAMED_APIS, NAMELESS, offered_max

log = logging.getLogger("kgw.namespaces")
_REFUSAL_CODE = {
    19: ErrorCode.invalid_topic_exception,
    20: ErrorCode.unknown_topic_id,
    68: ErrorCode.invalid_regular_expression,  # as the brokers answer an invalid one
}

_GROUPS, _CALLS = "consumer_groups", "consumer_calls"  # per connection (context.state)
_MAX_GROUPS = 1024


def _consumer_request(call: RequestCall, body: Any) -> bool:
    """Whether this JoinGroup/SyncGroup is of a consumer group (its bytes name topics);
    remembered for its response. SyncGroup before v5 does not say: the group's JoinGroup
    on this connection did."""
    state = call.context.state
    groups: set[str] = state.setdefault(_GROUPS, set())
    if call.api_key == JOIN_GROUP:
        consumer = bool(body.protocol_type == CONSUMER)
        if consumer:
            if len(groups) >= _MAX_GROUPS:
                groups.clear()
            groups.add(body.group_id)
    elif call.api_key == SYNC_GROUP:
        protocol_type = getattr(body, "protocol_type", None)
        consumer = (
            body.group_id in groups if protocol_type is None else bool(protocol_type == CONSUMER)
        )
    else:
        return False
    if consumer:
        state.setdefault(_CALLS, set()).add(call.correlation_id)
    return consumer


class NamespaceFilter(BaseFilter):
    name = "namespaces"
    api_keys: frozenset[int] | None = frozenset(NAMED_APIS)
    sees_local_answers = True  # the gateway's own refusals are in the tenant's names too

    def __init__(self, directory: Directory, acls_local: bool = False) -> None:
        super().__init__({})
        self.directory = directory
        self.acls_local = acls_local

    def _offered_max(self, key: int, gateway_max: int) -> int | None:
        if key in ACL_APIS and not self.acls_local:
            return None
        return offered_max(key, gateway_max)

    def namespace(self, context: FilterContext) -> Namespace | None:
        return self.directory.namespace(context.tenant, context.listener)

    def applies(self, context: FilterContext) -> bool:
        """Whether this connection's frames need the filter at all (else they pass
        undecoded, as without it)."""
        return self.namespace(context) is not None

    def namespace_prefix(self, context: FilterContext) -> str | None:
        """For the access log: the prefix this connection's names are mapped under."""
        ns = self.namespace(context)
        return None if ns is None else ns.prefix

    def on_request(self, call: RequestCall) -> None:
        ns = self.namespace(call.context)
        if ns is None:
            return
        top = self._offered_max(call.api_key, call.api_version)
        if top is None or call.api_version > top:  # not offered: refused before us, normally
            call.reject(ErrorCode.unsupported_version, "not offered with transparent names")
            return
        try:
            body = map_request(ns, call.api_key, call.body)
            if call.api_key in GROUP_APIS and _consumer_request(call, body):
                body = map_request_blobs(ns, call.api_key, body)
        except NameRefused as exc:
            log.info(
                "name refused for %s: %s",
                call.api_name,
                exc,
                extra={"event": "namespace_refused", "api": call.api_name},
            )
            code = _REFUSAL_CODE.get(call.api_key, ErrorCode.invalid_request)
            call.reject(code, str(exc))
            return
        if body is not call.body:
            call.replace(body)

    def on_response(self, call: ResponseCall) -> None:
        ns = self.namespace(call.context)
        if ns is None:
            return
        body: Any = map_response(ns, call.api_key, call.body)
        if call.api_key in GROUP_APIS:
            calls: set[int] = call.context.state.setdefault(_CALLS, set())
            consumer = call.correlation_id in calls
            calls.discard(call.correlation_id)
            try:
                body = map_response_blobs(ns, call.api_key, body, consumer)
            except NameRefused as exc:  # left as the brokers sent it: the group's own bytes
                log.warning(
                    "group protocol bytes not mapped in %s: %s",
                    call.api_name,
                    exc,
                    extra={"event": "namespace_group_bytes", "api": call.api_name},
                )
        if body is not call.body:
            call.replace(body)

    def advertise(self, context: FilterContext, key: int, spec: ApiSpec | None) -> ApiSpec | None:
        """What ApiVersions offers this connection for ``key`` (``spec``: what it would
        offer without namespaces)."""
        if spec is None or key in NAMELESS:
            return spec
        if context.tenant is None:
            if not self.directory.applies_to_listener(context.listener):
                return spec
        elif self.namespace(context) is None:
            return spec
        top = self._offered_max(key, spec.max_version)
        if top is None or top < spec.min_version:
            return None
        return (
            spec if top == spec.max_version else ApiSpec(spec.key, spec.name, spec.min_version, top)
        )
