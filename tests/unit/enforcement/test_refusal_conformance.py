"""Every API key and version kio knows (Kafka 4.1's ranges: tests/integration/
test_kafka_versions.py checks kio covers them), sent to a real Session as a request
the gateway does not forward. The answer must decode in the request's own version
and carry the error a broker would send, at the top level or on every entry the
request named; before SASL completes the connection closes instead.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any, cast

import pytest
from kio.schema.index import api_key_map

from gateway.addresses.topology import PublicMap
from gateway.authz.engine import Authorizer
from gateway.config import AuthorizationConfig
from gateway.enforcement import Enforcer, advertised
from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.protocol.codec import decode_response, encode_request
from gateway.sasl.connection import SASL_APIS, Authentication
from gateway.session import Fault, Session

from ..conftest import POLICIES
from .build import error_codes
from .samples import sample_request

IDENTITY = ClientIdentity("public", "10.0.0.9", 4000, "User:mallory")
ALL = [(k, v) for k in sorted(api_key_map) for v in sorted(apis.decodable_versions(k))]
UNSUPPORTED_VERSION = 35
AUTH_ERRORS = {29, 30, 31, 53}
# Forwarded to anyone (the broker's answer is filtered, or nothing there is authorized).
FORWARDED = {3, 16, 18, 60, 66}
# DescribeLogDirs v1-2 have no error field: Kafka answers a denial with no results.
NO_ERROR_FIELD = {(35, 1), (35, 2)}


def _ids(cases: list[tuple[int, int]]) -> list[str]:
    return [f"{apis.api_name(k)}-v{v}" for k, v in cases]


@pytest.fixture(scope="module")
def deny_all(tmp_path_factory: pytest.TempPathFactory) -> Authorizer:
    directory = tmp_path_factory.mktemp("policy")
    shutil.copy(POLICIES / "model.conf", directory / "model.conf")
    (directory / "policy.csv").write_text("\n")
    return Authorizer.from_config(AuthorizationConfig(policy_dir=Path(directory)))


def _request(key: int, version: int) -> bytes:
    request = sample_request(apis.request_schema(key, version), "orders")
    return encode_request(key, version, 42, "conformance", request)


def _answer(session: Session, key: int, version: int) -> Any:
    """Send one request the gateway answers itself; the decoded answer."""
    assert session.on_request(_request(key, version)) is None, "it reached a broker"
    (reply,) = session.take_ready()
    return decode_response(memoryview(reply)[4:], key, version)


def _assert_every_error_is(response: Any, allowed: set[int]) -> None:
    """The error at the top level, or else on every entry (and there is one)."""
    if int(getattr(response, "error_code", 0)) in allowed:
        return
    entries: dict[str, int] = {}
    for field in dataclasses.fields(response):
        value = getattr(response, field.name)
        for item in value if isinstance(value, tuple) else ():
            entries.update(error_codes(item, f"{field.name}[]"))
    assert entries, f"no error code in {response!r}"
    assert set(entries.values()) <= allowed, entries


def _offered(key: int, version: int) -> bool:
    """Offered with authorization on (SASL off: the SASL APIs are not)."""
    spec = advertised(key)
    return spec is not None and spec.min_version <= version <= spec.max_version


NOT_OFFERED = [(k, v) for k, v in ALL if k != apis.API_VERSIONS and not _offered(k, v)]


@pytest.mark.parametrize(("key", "version"), NOT_OFFERED, ids=_ids(NOT_OFFERED))
def test_a_version_not_offered_gets_unsupported_version_in_its_own_schema(
    key: int, version: int, mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    response = _answer(session, key, version)
    _assert_every_error_is(response, {UNSUPPORTED_VERSION})
    assert session.close_after_flush is None


def test_the_versions_of_the_issue_carry_the_error_per_partition(
    mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    produce = _answer(session, 0, 13)
    assert [int(p.error_code) for p in produce.responses[0].partition_responses] == [35]
    commit = _answer(session, 8, 10)
    assert [int(p.error_code) for p in commit.topics[0].partitions] == [35]
    markers = _answer(session, 27, 1)
    assert [int(p.error_code) for p in markers.markers[0].topics[0].partitions] == [35]


def test_api_versions_beyond_the_gateway_are_answered_in_v0(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY)
    newest = max(apis.decodable_versions(apis.API_VERSIONS))
    frame = bytearray(_request(apis.API_VERSIONS, newest))
    frame[6:8] = (newest + 1).to_bytes(2, "big")
    assert session.on_request(bytes(frame)) is None
    (reply,) = session.take_ready()
    response = decode_response(memoryview(reply)[4:], apis.API_VERSIONS, 0)
    assert int(response.error_code) == UNSUPPORTED_VERSION
    assert [int(k.api_key) for k in response.api_keys] == [apis.API_VERSIONS]


OFFERED = [(k, v) for k, v in ALL if _offered(k, v)]


@pytest.mark.parametrize(("key", "version"), OFFERED, ids=_ids(OFFERED))
def test_a_denied_request_gets_the_authorization_error_on_every_entry(
    key: int, version: int, mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    if key in FORWARDED:
        assert session.on_request(_request(key, version)) is not None
        return
    response = _answer(session, key, version)
    if (key, version) in NO_ERROR_FIELD:
        assert error_codes(response) == {} and response.results == ()
        return
    _assert_every_error_is(response, AUTH_ERRORS)


PRE_AUTH = [(k, v) for k, v in ALL if k not in (*SASL_APIS, apis.API_VERSIONS)]


@pytest.mark.parametrize(("key", "version"), PRE_AUTH, ids=_ids(PRE_AUTH))
def test_before_sasl_completes_anything_else_closes_the_connection(
    key: int, version: int, mapping: PublicMap
) -> None:
    auth = Authentication(cast(Any, None), IDENTITY, 3600)  # no mechanism is reached
    session = Session(mapping, IDENTITY, auth=auth)
    with pytest.raises(Fault) as fault:
        session.on_request(_request(key, version))
    assert fault.value.side == "client"
    assert session.take_ready() == []


def test_api_versions_is_forwarded_before_sasl(mapping: PublicMap) -> None:
    session = Session(mapping, IDENTITY, auth=Authentication(cast(Any, None), IDENTITY, 3600))
    newest = max(apis.decodable_versions(apis.API_VERSIONS))
    assert session.on_request(_request(apis.API_VERSIONS, newest)) is not None


def test_the_cases_cover_every_version_kio_knows() -> None:
    api_versions = {(18, v) for v in apis.decodable_versions(18)}
    assert set(NOT_OFFERED) | set(OFFERED) | api_versions == set(ALL)
    assert len(NOT_OFFERED) > 80 and len(OFFERED) > 150


@pytest.mark.parametrize("version", sorted(v for v in apis.decodable_versions(9) if v < 8))
def test_a_denied_group_is_refused_at_the_top_and_per_partition_in_offset_fetch(
    version: int, mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    response = _answer(session, 9, version)
    assert [int(p.error_code) for p in response.topics[0].partitions] == [30]
    assert int(getattr(response, "error_code", 30)) == 30  # v2+: the group's error on top


@pytest.mark.parametrize("version", sorted(apis.decodable_versions(43)))
def test_elect_leaders_is_refused_at_the_top_and_per_partition(
    version: int, mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    response = _answer(session, 43, version)
    (result,) = response.replica_election_results
    assert [int(p.error_code) for p in result.partition_result] == [31]
    assert int(getattr(response, "error_code", 31)) == 31


def test_an_acks_zero_produce_at_a_version_not_offered_closes_the_connection(
    mapping: PublicMap, deny_all: Authorizer
) -> None:
    session = Session(mapping, IDENTITY, Enforcer(deny_all, IDENTITY))
    assert not _offered(0, 13)
    request = dataclasses.replace(sample_request(apis.request_schema(0, 13), "orders"), acks=0)
    with pytest.raises(Fault) as fault:
        session.on_request(encode_request(0, 13, 42, "conformance", request))
    assert fault.value.side == "client"
    assert session.take_ready() == []
