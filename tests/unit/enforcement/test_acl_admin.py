"""CreateAcls / DescribeAcls / DeleteAcls change and read the gateway's casbin policy."""

from __future__ import annotations

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_acls.v3.response import DeleteAclsResponse
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import DescribeAclsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from gateway.authz.model import Operation, ResourceType
from gateway.enforcement import Enforcer
from gateway.identity import ClientIdentity

from ..conftest import MakeAuthorizer

ADMIN = ClientIdentity("l", "10.0.0.1", 1, "User:admin")
ALICE = ClientIdentity("l", "10.0.0.2", 2, "User:alice")
GRANT = AclCreation(
    resource_type=i8(2), resource_name="orders", resource_pattern_type=i8(3),
    principal="User:alice", host="*", operation=i8(3), permission_type=i8(3),
)  # fmt: skip
ANY_TOPIC = dict(
    resource_type_filter=i8(2), resource_name_filter=None, pattern_type_filter=i8(1),
    principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1),
)  # fmt: skip


def test_create_describe_delete_roundtrip(make_authorizer: MakeAuthorizer) -> None:
    authorizer = make_authorizer(
        ["p, User:admin, CLUSTER, LITERAL, kafka-cluster, ALTER, *, allow"]
    )
    admin = Enforcer(authorizer, ADMIN)
    assert not authorizer.authorize(
        "User:alice", "h", ResourceType.TOPIC, "orders", Operation.READ
    ).allowed

    created = admin.decide(30, CreateAclsRequest(creations=(GRANT,)), CreateAclsResponse)
    assert [r.error_code for r in created.local.results] == [ErrorCode.none]
    assert authorizer.authorize(
        "User:alice", "h", ResourceType.TOPIC, "orders", Operation.READ
    ).allowed

    listed = admin.decide(29, DescribeAclsRequest(**ANY_TOPIC), DescribeAclsResponse).local
    assert listed.error_code == ErrorCode.none
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in listed.resources] == [
        ("orders", ["User:alice"])
    ]

    deleted = admin.decide(
        31, DeleteAclsRequest(filters=(DeleteAclsFilter(**ANY_TOPIC),)), DeleteAclsResponse
    ).local
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["orders"]
    assert not authorizer.authorize(
        "User:alice", "h", ResourceType.TOPIC, "orders", Operation.READ
    ).allowed


def test_acl_changes_need_alter_on_the_cluster(make_authorizer: MakeAuthorizer) -> None:
    authorizer = make_authorizer([])
    verdict = Enforcer(authorizer, ALICE).decide(
        30, CreateAclsRequest(creations=(GRANT,)), CreateAclsResponse
    )
    assert [r.error_code for r in verdict.local.results] == [ErrorCode.cluster_authorization_failed]
    assert authorizer.store.list() == []


def test_an_invalid_acl_is_refused_with_invalid_request(make_authorizer: MakeAuthorizer) -> None:
    authorizer = make_authorizer([], super_users=["User:admin"])
    bad = AclCreation(
        resource_type=i8(2), resource_name="orders", resource_pattern_type=i8(3),
        principal="alice-without-type", host="*", operation=i8(3), permission_type=i8(3),
    )  # fmt: skip
    verdict = Enforcer(authorizer, ADMIN).decide(
        30, CreateAclsRequest(creations=(bad,)), CreateAclsResponse
    )
    (result,) = verdict.local.results
    assert result.error_code == ErrorCode.invalid_request and result.error_message
