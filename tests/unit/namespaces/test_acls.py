"""The ACL APIs for a namespaced tenant (decision 0034, addendum): what it sees, creates
and deletes stays inside its namespace, whatever the filter; the policy store is the
witness. Run through a real Session: namespace filter, authorization, acl_admin."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gateway.addresses.topology import PublicMap, Topology
from gateway.authz.engine import Authorizer
from gateway.authz.model import AclRule
from gateway.config import ListenerConfig
from gateway.enforcement import Enforcer
from gateway.filters.api import FilterContext
from gateway.filters.chain import FilterChain
from gateway.identity import ClientIdentity
from gateway.namespaces.directory import Directory
from gateway.namespaces.filter import NamespaceFilter
from gateway.namespaces.settings import NamespacesConfig
from gateway.protocol import apis
from gateway.protocol.codec import decode_response, encode_request
from gateway.session import Session

from ..conftest import MakeAuthorizer
from ..enforcement.build import from_data

TENANT = [
    "p, Role:tenant-acme, TOPIC, PREFIXED, acme., ALL, *, allow",
    "p, Role:tenant-acme, GROUP, PREFIXED, acme., ALL, *, allow",
    "p, Role:tenant-acme, TRANSACTIONAL_ID, PREFIXED, acme., ALL, *, allow",
    "g, User:acme.app, Role:tenant-acme",
]
OTHERS = [  # never shown to acme, never deleted by it
    "p, Role:tenant-beta, TOPIC, PREFIXED, beta., ALL, *, allow",
    "p, User:ops, TOPIC, LITERAL, *, DESCRIBE, *, allow",
    "p, User:ops, TOPIC, PREFIXED, acm, READ, *, allow",
    "p, User:ops, GROUP, PREFIXED, a, READ, *, allow",
    "p, User:ops, CLUSTER, LITERAL, kafka-cluster, ALTER, *, allow",
    "p, User:ops, TOPIC, LITERAL, ACME.orders, READ, *, allow",
    "p, User:ops, TOPIC, LITERAL, acme, READ, *, allow",
    "p, User:ops, GROUP, LITERAL, acme.*, READ, *, allow",  # would read as the wildcard
]
INSIDE = ["p, User:partner, TOPIC, LITERAL, acme.orders, READ, 10.0.0.1, allow"]
ANY = 1
ALL_FILTER = {
    "resource_type_filter": ANY,
    "resource_name_filter": None,
    "pattern_type_filter": ANY,
    "principal_filter": None,
    "host_filter": None,
    "operation": ANY,
    "permission_type": ANY,
}


def setup(
    make_authorizer: MakeAuthorizer, tenant: list[str] | None = None
) -> tuple[Session, Authorizer]:
    authorizer = make_authorizer([*(TENANT if tenant is None else tenant), *OTHERS, *INSIDE], None)
    identity = ClientIdentity("public", "10.1.2.3", 5555, "User:acme.app", tenant="acme")
    listener = ListenerConfig(
        name="public", bootstrap_port=9092, broker_port_base=9100, advertised_host="gw.example"
    )
    directory = Directory(NamespacesConfig(transparent_tenants=["acme"]))
    chain = FilterChain([NamespaceFilter(directory, acls_local=True)]).bind(identity)
    session = Session(
        PublicMap(listener, Topology()), identity, Enforcer(authorizer, identity), filters=chain
    )
    return session, authorizer


def call(session: Session, key: int, version: int, request: dict[str, Any]) -> Any:
    body = from_data(apis.request_schema(key, version), request)
    assert session.on_request(encode_request(key, version, 7, "app", body)) is None, "forwarded"
    (reply,) = session.take_ready()
    return decode_response(memoryview(reply)[4:], key, version)


def rules(authorizer: Authorizer) -> set[AclRule]:
    return set(authorizer.store.list())


def described(session: Session, version: int = 3, **changes: Any) -> set[tuple[int, str, int]]:
    response = call(session, 29, version, {**ALL_FILTER, **changes})
    assert response.error_code == ErrorCode.none, response.error_message
    return {(r.resource_type, r.resource_name, r.pattern_type) for r in response.resources}


STAR = {(2, "*", 3), (3, "*", 3), (5, "*", 3)}  # PREFIXED "acme." as the tenant's wildcard
OWN = {*STAR, (2, "orders", 3)}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_null_filter_lists_the_namespace_only(
    make_authorizer: MakeAuthorizer, version: int
) -> None:
    session, _ = setup(make_authorizer)
    assert described(session, version) == OWN


@pytest.mark.parametrize(
    ("name", "pattern", "expected"),
    [
        ("", 4, STAR),  # PREFIXED "": the whole namespace, the tenant's wildcard
        ("orders", 2, OWN),  # MATCH: the literal name and the wildcard
        ("orders", 3, {(2, "orders", 3)}),  # LITERAL
        ("*", 3, STAR),  # the tenant's wildcard is its namespace, never ops' "*"
        ("*", 1, STAR),
        ("*", 2, STAR),  # MATCH: acme's wildcard only
        ("*", 4, set()),  # PREFIXED "*": names starting with "*" in the namespace
        ("beta.", 4, set()),  # another tenant, in its cluster-side spelling
        ("acme.orders", 1, set()),  # one's own cluster-side name is just another name
        ("../beta.", 4, set()),
        ("ACME.orders", 2, STAR),  # not ops' ACME.orders
    ],
)
def test_filters_select_inside_the_namespace(
    make_authorizer: MakeAuthorizer, name: str, pattern: int, expected: set[Any]
) -> None:
    session, _ = setup(make_authorizer)
    found = described(session, resource_name_filter=name, pattern_type_filter=pattern)
    assert found == expected


def test_principals_and_hosts_are_shown_as_stored(make_authorizer: MakeAuthorizer) -> None:
    session, _ = setup(make_authorizer)
    response = call(session, 29, 3, {**ALL_FILTER, "resource_name_filter": "orders"})
    (resource,) = response.resources
    assert [(a.principal, a.host) for a in resource.acls] == [("User:partner", "10.0.0.1")]


def test_delete_everything_deletes_inside_only(make_authorizer: MakeAuthorizer) -> None:
    session, authorizer = setup(make_authorizer)
    before = rules(authorizer)
    response = call(session, 31, 3, {"filters": [ALL_FILTER]})
    (result,) = response.filter_results
    assert result.error_code == ErrorCode.none
    shown = {(m.resource_type, m.resource_name, m.pattern_type) for m in result.matching_acls}
    assert shown == OWN
    left = rules(authorizer)
    assert {r.name for r in before - left} == {"acme.", "acme.orders"}
    assert {r.name for r in left} == {
        "beta.",
        "*",
        "acm",
        "a",
        "kafka-cluster",
        "ACME.orders",
        "acme",
        "acme.*",
    }


def test_delete_match_leaves_the_boundary_spanning_rules(make_authorizer: MakeAuthorizer) -> None:
    session, authorizer = setup(make_authorizer)
    flt = {**ALL_FILTER, "resource_name_filter": "orders", "pattern_type_filter": 2}
    flt["principal_filter"] = "User:ops"  # ops' "*", "acm" and "" match acme.orders: not acme's
    (result,) = call(session, 31, 3, {"filters": [flt]}).filter_results
    assert result.matching_acls == ()
    assert len(rules(authorizer)) == len(TENANT) - 1 + len(OTHERS) + len(INSIDE)


def creation(name: str, rtype: int = 2, pattern: int = 3, **changes: Any) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": "User:partner",
        "host": "10.0.0.2",
        "operation": 3,
        "permission_type": 3,
        **changes,
    }


def test_creations_land_inside_the_namespace(make_authorizer: MakeAuthorizer) -> None:
    session, authorizer = setup(make_authorizer)
    before = rules(authorizer)
    response = call(
        session,
        30,
        3,
        {
            "creations": [
                creation("billing", 3),
                creation("beta.orders"),  # another tenant's spelling: a name of acme's
                creation("*"),  # the tenant's wildcard: all of acme, nothing else
                creation("", 3, 4),  # PREFIXED "": the same, for groups
                creation("tx-", 5, 4),
            ]
        },
    )
    assert [r.error_code for r in response.results] == [ErrorCode.none] * 5
    added = {
        (r.resource_type.name, r.name, r.pattern_type.name) for r in rules(authorizer) - before
    }
    assert added == {
        ("GROUP", "acme.billing", "LITERAL"),
        ("TOPIC", "acme.beta.orders", "LITERAL"),
        ("TOPIC", "acme.", "PREFIXED"),
        ("GROUP", "acme.", "PREFIXED"),
        ("TRANSACTIONAL_ID", "acme.tx-", "PREFIXED"),
    }
    assert {(r.principal, r.host) for r in rules(authorizer) - before} == {
        ("User:partner", "10.0.0.2")
    }
    assert described(session, resource_name_filter="billing") == {(3, "billing", 3)}


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (creation("kafka-cluster", 4), ErrorCode.invalid_request),  # acme.kafka-cluster
        (creation("acme", 7), ErrorCode.invalid_request),  # USER: not in the policy model
        (creation("t", 6), ErrorCode.cluster_authorization_failed),  # DELEGATION_TOKEN
    ],
)
def test_creations_outside_are_refused(
    make_authorizer: MakeAuthorizer, entry: dict[str, Any], code: ErrorCode
) -> None:
    session, authorizer = setup(make_authorizer)
    before = rules(authorizer)
    (result,) = call(session, 30, 3, {"creations": [entry]}).results
    assert result.error_code == code
    assert rules(authorizer) == before


def test_without_alter_nothing_changes(make_authorizer: MakeAuthorizer) -> None:
    readers = [
        "p, Role:tenant-acme, TOPIC, PREFIXED, acme., READ, *, allow",
        "p, Role:tenant-acme, TOPIC, PREFIXED, acme., DESCRIBE, *, allow",
        "g, User:acme.app, Role:tenant-acme",
    ]
    session, authorizer = setup(make_authorizer, readers)
    before = rules(authorizer)
    (result,) = call(session, 30, 3, {"creations": [creation("orders")]}).results
    assert result.error_code == ErrorCode.cluster_authorization_failed
    (deleted,) = call(session, 31, 3, {"filters": [ALL_FILTER]}).filter_results
    assert deleted.matching_acls == ()
    assert rules(authorizer) == before
    # DESCRIBE on its topics: it sees their ACLs (and no group's: no right there)
    assert described(session) == {(2, "*", 3), (2, "orders", 3)}


def test_a_denied_describe_hides(make_authorizer: MakeAuthorizer) -> None:
    """WRITE, READ… imply DESCRIBE (Kafka); an explicit DENY hides the topics' ACLs."""
    denied = [*TENANT, "p, Role:tenant-acme, TOPIC, PREFIXED, acme., DESCRIBE, *, deny"]
    session, _ = setup(make_authorizer, denied)
    assert described(session) == {(3, "*", 3), (5, "*", 3)}


def test_not_offered_where_the_brokers_would_answer() -> None:
    """Without the gateway's policy (no authorization) the ACL APIs would reach the
    brokers, where a null filter cannot be confined: not offered, refused."""
    identity = ClientIdentity("public", "10.1.2.3", 5555, "User:acme.app", tenant="acme")
    directory = Directory(NamespacesConfig(transparent_tenants=["acme"]))
    context = FilterContext(identity, logging.getLogger("test"))
    spec = apis.gateway_apis()[29]
    assert NamespaceFilter(directory).advertise(context, 29, spec) is None
    assert NamespaceFilter(directory, acls_local=True).advertise(context, 29, spec) == spec


def test_an_operators_denial_stays_whatever_the_tenant_deletes(
    make_authorizer: MakeAuthorizer,
) -> None:
    """A tenant with ALL on its namespace deletes ALLOW rules there, never the DENY rules
    an operator put on its resources: it sees them, they stay."""
    denied = [*TENANT, "p, Role:tenant-acme, TOPIC, LITERAL, acme.audit, DELETE, *, deny"]
    session, authorizer = setup(make_authorizer, denied)
    assert described(session, resource_name_filter="audit", pattern_type_filter=3) == {
        (2, "audit", 3)
    }
    audit = {**ALL_FILTER, "resource_name_filter": "audit", "pattern_type_filter": 3}
    # the filters aimed at the denial first, while the tenant still holds ALTER
    for flt in (audit, {**ALL_FILTER, "permission_type": 2}, ALL_FILTER):
        (result,) = call(session, 31, 3, {"filters": [flt]}).filter_results
        assert all(m.permission_type == 3 for m in result.matching_acls)  # ALLOW only
        left = [r.operation.name for r in rules(authorizer) if r.name == "acme.audit"]
        assert left == ["DELETE"]
    assert not [r for r in rules(authorizer) if r.name == "acme."]  # its own grants went


def test_a_tenant_adds_no_deny_rule(make_authorizer: MakeAuthorizer) -> None:
    """Adding DENY rules is the operators' too: refused with error 31 and the reason."""
    session, authorizer = setup(make_authorizer)
    before = rules(authorizer)
    (result,) = call(session, 30, 3, {"creations": [creation("orders", permission_type=2)]}).results
    assert result.error_code == ErrorCode.cluster_authorization_failed
    assert "operators" in (result.error_message or "")
    assert rules(authorizer) == before


@pytest.mark.parametrize("authorization", [True, False])
def test_wiring_offers_acls_only_with_the_gateways_policy(
    authorization: bool, tmp_path: Path
) -> None:
    from gateway.config import parse_config
    from gateway.namespaces.wiring import namespace_filters

    data: dict[str, Any] = {
        "upstream": {"bootstrap_servers": ["10.0.0.1:9092"]},
        "listeners": [{"name": "l", "bootstrap_port": 9092, "broker_port_base": 9100,
                       "advertised_host": "kafka.example.com"}],
        "namespaces": {"transparent_tenants": ["acme"]},
    }  # fmt: skip
    if authorization:
        data["authorization"] = {"policy_dir": str(tmp_path)}
    (built,) = namespace_filters(parse_config(data), None)
    assert isinstance(built, NamespaceFilter) and built.acls_local is authorization


@pytest.mark.parametrize(
    "principal", ["Role:tenant-CN=ingest", "Role:tenant-beta.team", "Role:ops"]
)
def test_a_tenant_grants_to_no_role(make_authorizer: MakeAuthorizer, principal: str) -> None:
    """A role is the operators': ``Role:tenant-<name>`` would even make a tenant for the
    brokers' ACLs and take over another tenant's principals (broker_acls.py)."""
    session, authorizer = setup(make_authorizer)
    before = rules(authorizer)
    entry = {**creation("orders"), "principal": principal}
    (result,) = call(session, 30, 3, {"creations": [entry]}).results
    assert result.error_code == ErrorCode.cluster_authorization_failed
    assert "roles" in (result.error_message or "")
    assert rules(authorizer) == before
