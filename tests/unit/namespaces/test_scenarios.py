"""Data-driven namespace scenarios (scenarios/*.yaml), run through a real Session with the
namespace filter first in the chain and authorization behind it.

Each scenario: tenant ``acme`` (policy: everything PREFIXED ``acme.``), a request in the
tenant's names; then the names that reach the broker (cluster-side: authorization saw
and allowed them), the broker's answer (cluster-side, possibly with other tenants'
resources) and the names the client gets back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kio.schema.index import api_key_map

from gateway.addresses.topology import PublicMap, Topology
from gateway.config import ListenerConfig
from gateway.enforcement import Enforcer
from gateway.filters.chain import FilterChain
from gateway.identity import ClientIdentity
from gateway.namespaces.directory import Directory
from gateway.namespaces.filter import NamespaceFilter
from gateway.namespaces.settings import NamespacesConfig
from gateway.protocol import apis
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_head,
)
from gateway.session import Session

from ..conftest import MakeAuthorizer
from ..enforcement.build import error_codes, from_data
from ..enforcement.test_scenarios import names_in

KEYS = {name: key for key, name in api_key_map.items()}
POLICY = [
    "p, Role:tenant-acme, TOPIC, PREFIXED, acme., ALL, *, allow",
    "p, Role:tenant-acme, GROUP, PREFIXED, acme., ALL, *, allow",
    "p, Role:tenant-acme, TRANSACTIONAL_ID, PREFIXED, acme., ALL, *, allow",
    "g, User:acme.app, Role:tenant-acme",
    # rules the tenant must never see or touch through the ACL APIs (acls.yaml)
    "p, Role:tenant-beta, TOPIC, PREFIXED, beta., ALL, *, allow",
    "p, User:ops, TOPIC, LITERAL, *, DESCRIBE, *, allow",
    "p, User:ops, TOPIC, PREFIXED, acm, READ, *, allow",
    "p, User:ops, CLUSTER, LITERAL, kafka-cluster, ALTER, *, allow",
    # a rule inside acme's namespace for someone else: acme's to see (as ``orders``)
    "p, User:partner, TOPIC, LITERAL, acme.orders, READ, 10.0.0.1, allow",
]
SCENARIOS = [
    (path.stem, case)
    for path in sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
    for case in yaml.safe_load(path.read_text())
]


def session_for(make_authorizer: MakeAuthorizer) -> Session:
    authorizer = make_authorizer(POLICY, None)
    identity = ClientIdentity("public", "10.1.2.3", 5555, "User:acme.app", tenant="acme")
    listener = ListenerConfig(
        name="public", bootstrap_port=9092, broker_port_base=9100, advertised_host="gw.example"
    )
    settings = NamespacesConfig(transparent_tenants=["acme"])
    chain = FilterChain([NamespaceFilter(Directory(settings), acls_local=True)]).bind(identity)
    enforcer = Enforcer(authorizer, identity)
    return Session(PublicMap(listener, Topology()), identity, enforcer, filters=chain)


@pytest.mark.parametrize(
    ("file", "case"), SCENARIOS, ids=[f"{f}:{c['name']}" for f, c in SCENARIOS]
)
def test_scenario(file: str, case: dict[str, Any], make_authorizer: MakeAuthorizer) -> None:
    session = session_for(make_authorizer)
    key = KEYS[case["api"]]
    version = case["version"]
    request = from_data(apis.request_schema(key, version), case["request"])
    expect = case["expect"]
    forwarded = session.on_request(encode_request(key, version, 7, "app", request))
    if expect.get("forwarded") is None:
        assert forwarded is None, "the request reached the broker"
    else:
        assert forwarded is not None, "the request did not reach the broker"
        payload = memoryview(forwarded)[4:]
        sent = decode_request(parse_request_head(payload), payload)
        assert names_in(sent) == set(expect["forwarded"]), "what reached the broker"
        for field, value in expect.get("forwarded_fields", {}).items():
            assert getattr(sent, field) == value, field
        upstream = from_data(apis.response_schema(key, version), case.get("upstream", {}))
        session.on_response(encode_response(key, version, 7, upstream))
    (reply,) = session.take_ready()
    response = decode_response(memoryview(reply)[4:], key, version)
    if "names" in expect:
        assert names_in(response) == set(expect["names"]), "what the client sees"
    codes = error_codes(response)
    for label, code in expect.get("errors", {}).items():
        assert codes.get(label) == code, f"{label}: {codes}"
    for field, value in expect.get("fields", {}).items():
        assert getattr(response, field) == value, field


def test_every_mapped_api_has_a_scenario() -> None:
    from gateway.namespaces.table import NAMED_APIS

    covered = {KEYS[case["api"]] for _, case in SCENARIOS}
    missing = sorted(apis.api_name(k) for k in set(NAMED_APIS) - covered)
    assert not missing, missing


def test_the_access_log_keeps_cluster_names_and_records_the_namespace(
    make_authorizer: MakeAuthorizer,
) -> None:
    session = session_for(make_authorizer)
    session.observe = True
    request = from_data(
        apis.request_schema(3, 12),
        {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False},
    )
    assert session.on_request(encode_request(3, 12, 7, "app", request)) is not None
    upstream = from_data(apis.response_schema(3, 12), {"topics": [{"name": "acme.orders"}]})
    session.on_response(encode_response(3, 12, 7, upstream))
    session.take_ready()
    (exchange,) = session.take_finished()
    assert exchange.namespace == "acme."
    assert exchange.resources.topics == ("acme.orders",)
