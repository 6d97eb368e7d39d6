"""Kafka's ACL admin APIs answered by the gateway from its casbin policy store.

``kafka-acls.sh --bootstrap-server <gateway>`` and AdminClient ACL calls read and
change the gateway's policies (policies/policy.csv), not the brokers' ACLs.
DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ..authz.engine import Authorizer
from ..authz.model import AclFilter, AclRule, InvalidRuleError
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


def handle(
    key: int, request: Any, rc: type[Any], check: Check, authorizer: Authorizer, actor: str
) -> Verdict:
    needed = Op.DESCRIBE if key == DESCRIBE_ACLS else Op.ALTER
    if not check(R.CLUSTER, CLUSTER_NAME, needed):
        # As Kafka's AclApis, at every version: 31 with a message, at the top level
        # (DescribeAcls) or on every creation / filter (CreateAcls, DeleteAcls).
        return deny_whole(rc, CLUSTER_DENIED, request, CLUSTER_DENIED_MESSAGE)
    if key == DESCRIBE_ACLS:
        return Verdict(local=_describe(request, rc, authorizer))
    if key == CREATE_ACLS:
        return Verdict(local=_create(request, rc, authorizer, actor))
    return Verdict(local=_delete(request, rc, authorizer, actor))


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


def _describe(request: Any, rc: type[Any], authorizer: Authorizer) -> Any:
    try:
        rules = authorizer.store.list(_filter(request))
    except InvalidRuleError as exc:
        base = respond_only(rc, "resources", ())
        return dataclasses.replace(
            base, error_code=ErrorCode.invalid_request, error_message=str(exc)
        )
    resource_cls = list_item_type(rc, "resources")
    acl_cls = list_item_type(resource_cls, "acls")
    grouped: dict[tuple[int, str, int], list[AclRule]] = defaultdict(list)
    for rule in rules:
        grouped[(int(rule.resource_type), rule.name, int(rule.pattern_type))].append(rule)
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


def _create(request: Any, rc: type[Any], authorizer: Authorizer, actor: str) -> Any:
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
            authorizer.store.add([rule], actor=actor)
        except (InvalidRuleError, PolicyError) as exc:
            results.append(result_cls(error_code=ErrorCode.invalid_request, error_message=str(exc)))
            continue
        log.info("acl created: %s", rule, extra={"event": "acl_created", "principal": actor})
        results.append(result_cls(error_code=ErrorCode.none, error_message=None))
    authorizer.reload_if_changed(fresh=True)
    return respond_only(rc, "results", results)


def _delete(request: Any, rc: type[Any], authorizer: Authorizer, actor: str) -> Any:
    filter_cls = list_item_type(rc, "filter_results")
    match_cls = list_item_type(filter_cls, "matching_acls")
    results = []
    for entry in request.filters:
        try:
            removed = authorizer.store.remove(_filter(entry), actor=actor)
        except (InvalidRuleError, PolicyError) as exc:
            results.append(
                filter_cls(
                    error_code=ErrorCode.invalid_request, error_message=str(exc), matching_acls=()
                )
            )
            continue
        for rule in removed:
            log.info("acl deleted: %s", rule, extra={"event": "acl_deleted", "principal": actor})
        matches = tuple(
            match_cls(
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=int(r.resource_type),
                resource_name=r.name,
                pattern_type=int(r.pattern_type),
                principal=r.principal,
                host=r.host,
                operation=int(r.operation),
                permission_type=int(r.permission),
            )
            for r in removed
        )
        results.append(
            filter_cls(error_code=ErrorCode.none, error_message=None, matching_acls=matches)
        )
    authorizer.reload_if_changed(fresh=True)
    return respond_only(rc, "filter_results", results)
