"""Kafka's ACL admin APIs answered by the gateway from its casbin policy store.

``kafka-acls.sh --bootstrap-server <gateway>`` and AdminClient ACL calls read and
change the gateway's policies (policies/policy.csv), not the brokers' ACLs.
DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER.

``scope`` (a namespaced tenant's prefix, decision 0034): the names arrive mapped to
the cluster's already (the namespace filter) and the answer is confined to rules
inside the namespace — TOPIC, GROUP and TRANSACTIONAL_ID patterns starting with the
prefix — shown without it. Such a rule is judged on its own resource instead of the
cluster: DESCRIBE on it to see it, ALTER on it to create or delete it. A tenant
creates and deletes ALLOW rules only: DENY rules are the operators' (security admins'
restrictions on the tenant), which it sees but can neither delete nor add. A null or
MATCH filter selects inside the namespace only; nothing cluster-wide or another
tenant's is ever shown, created or deleted.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ..authz.engine import Authorizer
from ..authz.model import (
    WILDCARD,
    AclFilter,
    AclRule,
    InvalidRuleError,
    PatternType,
    Permission,
)
from ..authz.model import Operation as Op
from ..authz.model import ResourceType as R
from ..authz.store import PolicyError
from .mirror import list_item_type
from .toolkit import CLUSTER_DENIED, CLUSTER_NAME, deny_whole, respond_only
from .verdict import Check, Verdict

log = logging.getLogger("kgw.authz")
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ACL_APIS = frozenset({DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS})
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."  # Kafka's text for error 31
SCOPED_TYPES = frozenset({R.TOPIC, R.GROUP, R.TRANSACTIONAL_ID})  # a namespace's kinds
OUTSIDE_MESSAGE = "only ACLs on the tenant's own topics, groups and transactional ids"
DENY_MESSAGE = "DENY rules on a tenant's resources are set by the operators"


def handle(
    key: int,
    request: Any,
    rc: type[Any],
    check: Check,
    authorizer: Authorizer,
    actor: str,
    scope: str | None = None,
) -> Verdict:
    needed = Op.DESCRIBE if key == DESCRIBE_ACLS else Op.ALTER
    if scope is not None:
        space = _Scope(scope, check, needed)
        if key == DESCRIBE_ACLS:
            return Verdict(local=_describe(request, rc, authorizer, space))
        if key == CREATE_ACLS:
            return Verdict(local=_create(request, rc, authorizer, actor, space))
        return Verdict(local=_delete(request, rc, authorizer, actor, space))
    if not check(R.CLUSTER, CLUSTER_NAME, needed):
        # As Kafka's AclApis, at every version: 31 with a message, at the top level
        # (DescribeAcls) or on every creation / filter (CreateAcls, DeleteAcls).
        return deny_whole(rc, CLUSTER_DENIED, request, CLUSTER_DENIED_MESSAGE)
    if key == DESCRIBE_ACLS:
        return Verdict(local=_describe(request, rc, authorizer))
    if key == CREATE_ACLS:
        return Verdict(local=_create(request, rc, authorizer, actor))
    return Verdict(local=_delete(request, rc, authorizer, actor))


class _Scope:
    """A namespaced tenant's view of the policy: rules inside ``prefix`` that it may
    ``needed`` (DESCRIBE or ALTER), each judged on its own resource."""

    __slots__ = ("check", "needed", "prefix")

    def __init__(self, prefix: str, check: Check, needed: Op) -> None:
        self.prefix, self.check, self.needed = prefix, check, needed

    def inside(self, rule: AclRule) -> bool:
        if rule.resource_type not in SCOPED_TYPES or not rule.name.startswith(self.prefix):
            return False
        # a literal tenant-side "*" would read as Kafka's wildcard: never the tenant's
        return not (rule.pattern_type is PatternType.LITERAL and rule.name == self.prefix + "*")

    def allows(self, rule: AclRule) -> bool:
        if self.needed is Op.ALTER and rule.permission is not Permission.ALLOW:
            return False  # DENY rules are the operators': never created or deleted here
        return self.inside(rule) and self.check(rule.resource_type, rule.name, self.needed)

    def shown(self, rule: AclRule) -> tuple[str, PatternType]:
        """The rule's pattern as the tenant sees it: PREFIXED ``<prefix>``, all of the
        namespace, is the tenant's wildcard, LITERAL ``*``."""
        if rule.pattern_type is PatternType.PREFIXED and rule.name == self.prefix:
            return WILDCARD, PatternType.LITERAL
        return rule.name[len(self.prefix) :], rule.pattern_type


def _filter(entry: Any) -> AclFilter:
    return AclFilter.from_kafka(
        int(entry.resource_type_filter),
        entry.resource_name_filter,
        int(entry.pattern_type_filter),
        entry.principal_filter,
        entry.host_filter,
        int(entry.operation),
        int(entry.permission_type),
    )


def _describe(
    request: Any, rc: type[Any], authorizer: Authorizer, scope: _Scope | None = None
) -> Any:
    try:
        rules = authorizer.store.list(_filter(request))
        if scope is not None:
            rules = [r for r in rules if scope.allows(r)]
    except InvalidRuleError as exc:
        base = respond_only(rc, "resources", ())
        return dataclasses.replace(
            base, error_code=ErrorCode.invalid_request, error_message=str(exc)
        )
    resource_cls = list_item_type(rc, "resources")
    acl_cls = list_item_type(resource_cls, "acls")
    grouped: dict[tuple[int, str, int], list[AclRule]] = defaultdict(list)
    for rule in rules:
        name, pattern = (rule.name, rule.pattern_type) if scope is None else scope.shown(rule)
        grouped[(int(rule.resource_type), name, int(pattern))].append(rule)
    resources = tuple(
        resource_cls(
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(
                acl_cls(
                    principal=r.principal,
                    host=r.host,
                    operation=int(r.operation),
                    permission_type=int(r.permission),
                )
                for r in group
            ),
        )
        for (rtype, name, pattern), group in grouped.items()
    )
    return respond_only(rc, "resources", resources)


def _create(
    request: Any, rc: type[Any], authorizer: Authorizer, actor: str, scope: _Scope | None = None
) -> Any:
    result_cls = list_item_type(rc, "results")
    results = []
    for creation in request.creations:
        try:
            rule = AclRule.from_kafka(
                int(creation.resource_type),
                creation.resource_name,
                int(creation.resource_pattern_type),
                creation.principal,
                creation.host,
                int(creation.operation),
                int(creation.permission_type),
            )
            if scope is not None and not scope.allows(rule):
                results.append(
                    result_cls(error_code=CLUSTER_DENIED, error_message=_refusal(rule, scope))
                )
                continue
            if scope is not None and not rule.principal.startswith("User:"):
                # a role is the operators' (``Role:tenant-<name>`` even makes a tenant
                # for the brokers' ACLs, broker_acls.py): a tenant grants to users only
                results.append(result_cls(error_code=CLUSTER_DENIED, error_message=ROLE_MESSAGE))
                continue
            authorizer.store.add([rule], actor=actor)
        except (InvalidRuleError, PolicyError) as exc:
            results.append(result_cls(error_code=ErrorCode.invalid_request, error_message=str(exc)))
            continue
        log.info("acl created: %s", rule, extra={"event": "acl_created", "principal": actor})
        results.append(result_cls(error_code=ErrorCode.none, error_message=None))
    authorizer.reload_if_changed(fresh=True)
    return respond_only(rc, "results", results)


ROLE_MESSAGE = "ACLs for roles are managed by the operators; grant to User: principals"


def _refusal(rule: AclRule, scope: _Scope) -> str:
    if scope.needed is Op.ALTER and rule.permission is not Permission.ALLOW:
        return DENY_MESSAGE
    if scope.inside(rule):
        return f"not authorized to {scope.needed.name} {rule.resource_type.name} ACLs there"
    return OUTSIDE_MESSAGE


def _remove(authorizer: Authorizer, flt: AclFilter, actor: str, scope: _Scope | None) -> Any:
    """The rules ``flt`` selects removed (inside the namespace only, with a scope)."""
    if scope is None:
        return authorizer.store.remove(flt, actor=actor)
    # judged first, all of them: removing the tenant's own grant must not change the
    # verdict on the next rule; then exactly each rule, nothing else its filter matches
    doomed = [rule for rule in authorizer.store.list(flt) if scope.allows(rule)]
    removed = []
    for rule in doomed:
        removed += authorizer.store.remove(_exactly(rule), actor=actor)
    return removed


def _exactly(rule: AclRule) -> AclFilter:
    return AclFilter(
        rule.principal,
        rule.resource_type,
        rule.pattern_type,
        rule.name,
        rule.operation,
        rule.host,
        rule.permission,
    )


def _match(match_cls: type[Any], rule: AclRule, scope: _Scope | None) -> Any:
    name, pattern = (rule.name, rule.pattern_type) if scope is None else scope.shown(rule)
    return match_cls(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=int(rule.resource_type),
        resource_name=name,
        pattern_type=int(pattern),
        principal=rule.principal,
        host=rule.host,
        operation=int(rule.operation),
        permission_type=int(rule.permission),
    )


def _delete(
    request: Any, rc: type[Any], authorizer: Authorizer, actor: str, scope: _Scope | None = None
) -> Any:
    filter_cls = list_item_type(rc, "filter_results")
    match_cls = list_item_type(filter_cls, "matching_acls")
    results = []
    for entry in request.filters:
        try:
            removed = _remove(authorizer, _filter(entry), actor, scope)
        except (InvalidRuleError, PolicyError) as exc:
            results.append(
                filter_cls(
                    error_code=ErrorCode.invalid_request, error_message=str(exc), matching_acls=()
                )
            )
            continue
        for rule in removed:
            log.info("acl deleted: %s", rule, extra={"event": "acl_deleted", "principal": actor})
        matches = tuple(_match(match_cls, r, scope) for r in removed)
        results.append(
            filter_cls(error_code=ErrorCode.none, error_message=None, matching_acls=matches)
        )
    authorizer.reload_if_changed(fresh=True)
    return respond_only(rc, "filter_results", results)
