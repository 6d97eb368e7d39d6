"""Answers the gateway makes itself for a transparent tenant (a request authorization
refuses whole, a fetch of nothing readable) are in the tenant's names, as a broker's
answers are: the namespace filter sees them (``sees_local_answers``)."""

from __future__ import annotations

from ..conftest import MakeAuthorizer
from .test_acls import TENANT, call, setup

DENY_AUDIT = "p, Role:tenant-acme, TOPIC, LITERAL, acme.audit, DELETE, *, deny"


def test_a_refused_delete_names_the_topic_as_the_tenant_does(
    make_authorizer: MakeAuthorizer,
) -> None:
    session, _ = setup(make_authorizer, [*TENANT, DENY_AUDIT])
    response = call(session, 20, 4, {"topic_names": ["audit"], "timeout": 1000})
    assert [(r.name, int(r.error_code)) for r in response.responses] == [("audit", 29)]


def test_a_refused_group_read_names_the_group_as_the_tenant_does(
    make_authorizer: MakeAuthorizer,
) -> None:
    topics_only = [r for r in TENANT if "GROUP" not in r]
    session, _ = setup(make_authorizer, topics_only)
    response = call(session, 15, 5, {"groups": ["g1"], "include_authorized_operations": False})
    assert [(g.group_id, int(g.error_code)) for g in response.groups] == [("g1", 30)]


def test_a_fetch_of_nothing_readable_names_the_topic_as_the_tenant_does(
    make_authorizer: MakeAuthorizer,
) -> None:
    deny_read = "p, Role:tenant-acme, TOPIC, LITERAL, acme.secret, READ, *, deny"
    session, _ = setup(make_authorizer, [*TENANT, deny_read])
    body = {"replica_id": -1, "max_wait": 0, "topics": [{"topic": "secret", "partitions": []}]}
    response = call(session, 1, 12, body)
    assert [t.topic for t in response.responses] == ["secret"]
