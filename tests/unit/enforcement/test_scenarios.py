"""Data-driven authorization scenarios (scenarios/*.yaml), run through a real Session.

Each scenario: given a policy, when this request at this version, then what reaches
the broker (a recording upstream) and the error codes in the response the client gets.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from kio.schema.index import api_key_map

from gateway.addresses.topology import PublicMap, Topology
from gateway.config import ListenerConfig
from gateway.enforcement import Enforcer
from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_head,
)
from gateway.session import Fault, Session

from ..conftest import MakeAuthorizer
from .build import error_codes, from_data

KEYS = {name: key for key, name in api_key_map.items()}
SCENARIOS = [
    (path.stem, case)
    for path in sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
    for case in yaml.safe_load(path.read_text())
]


def names_in(entity: Any) -> set[str]:
    found: set[str] = set()
    if dataclasses.is_dataclass(entity):
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if field.name in (
                "name",
                "topic",
                "topic_name",
                "group_id",
                "transactional_id",
                "key",
                "resource_name",
            ):
                if isinstance(value, str):
                    found.add(value)
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, str) and field.name in (
                        "groups", "groups_names", "coordinator_keys", "topic_names", "group_ids",
                        "transactional_ids", "subscribed_topic_names",
                    ):  # fmt: skip
                        found.add(item)
                    else:
                        found |= names_in(item)
            elif dataclasses.is_dataclass(value):
                found |= names_in(value)
    return found


@pytest.mark.parametrize(
    ("file", "case"), SCENARIOS, ids=[f"{f}:{c['name']}" for f, c in SCENARIOS]
)
def test_scenario(file: str, case: dict[str, Any], make_authorizer: MakeAuthorizer) -> None:
    authorizer = make_authorizer(case.get("policy", []), case.get("super_users"))
    who = case.get("principal", "User:alice")
    identity = ClientIdentity("public", case.get("host", "10.1.2.3"), 5555, who)
    listener = ListenerConfig(
        name="public", bootstrap_port=9092, broker_port_base=9100, advertised_host="gw.example"
    )
    session = Session(PublicMap(listener, Topology()), identity, Enforcer(authorizer, identity))
    key = KEYS[case["api"]]
    version = case["version"]
    request = from_data(apis.request_schema(key, version), case["request"])
    expect = case["expect"]

    if expect.get("closed"):
        with pytest.raises(Fault) as info:
            session.on_request(encode_request(key, version, 7, "app", request))
        assert info.value.side == "client"
        return
    forwarded = session.on_request(encode_request(key, version, 7, "app", request))

    if expect["forwarded"] is None:
        assert forwarded is None, "a fully denied request reached the broker"
    else:
        assert forwarded is not None
        payload = memoryview(forwarded)[4:]
        sent = decode_request(parse_request_head(payload), payload)
        assert names_in(sent) == set(expect["forwarded"]), "what reached the broker"
        for field, value in expect.get("forwarded_fields", {}).items():
            assert getattr(sent, field) == value
        response_cls = apis.response_schema(key, version)
        upstream = from_data(response_cls, case.get("upstream", {}))
        session.on_response(encode_response(key, version, 7, upstream))

    (reply,) = session.take_ready()
    response = decode_response(memoryview(reply)[4:], key, version)
    codes = error_codes(response)
    for label, code in expect.get("errors", {}).items():
        assert codes.get(label) == code, f"{label}: {codes}"
    if "names" in expect:
        assert names_in(response) == set(expect["names"])
    for field, value in expect.get("fields", {}).items():
        assert getattr(response, field) == value, field
