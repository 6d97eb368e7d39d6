"""Every API and version the gateway advertises with authorization on, checked generically:
a principal with no grants gets an authorization error and nothing reaches a broker;
a super user's request is forwarded byte for byte."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.enforcement import Enforcer, advertised
from gateway.enforcement.acl_admin import ACL_APIS
from gateway.enforcement.units import UNITS
from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.protocol.codec import decode_response, encode_response

from ..conftest import MakeAuthorizer
from .build import error_codes
from .samples import sample_request

AUTH_ERRORS = {29, 30, 31, 53}
# Answered without a resource check, or by filtering the broker's answer.
FORWARDED_FOR_ANYONE = {18, 60, 16, 66}
# Kafka answers these versions of DescribeLogDirs with an empty result, no error code.
EMPTY_WHEN_DENIED = {(35, 1), (35, 2)}


def _cases() -> list[tuple[int, int]]:
    cases = []
    for key in sorted(apis.gateway_apis()):
        spec = advertised(key)
        if spec is not None:
            cases.extend((key, v) for v in range(spec.min_version, spec.max_version + 1))
    return cases


CASES = _cases()


def test_every_advertised_api_has_a_unit() -> None:
    assert {key for key, _ in CASES} <= set(UNITS) | ACL_APIS
    assert len(CASES) > 150


METADATA = 3


@pytest.mark.parametrize(
    ("key", "version"), CASES, ids=[f"{apis.api_name(k)}-v{v}" for k, v in CASES]
)
def test_no_grants_means_denied_and_nothing_forwarded(
    key: int, version: int, make_authorizer: MakeAuthorizer
) -> None:
    authorizer = make_authorizer([])
    enforcer = Enforcer(authorizer, ClientIdentity("l", "10.0.0.9", 4000, "User:mallory"))
    request = sample_request(apis.request_schema(key, version), "secret")
    verdict = enforcer.decide(key, request, apis.response_schema(key, version))
    if key in FORWARDED_FOR_ANYONE:
        assert verdict.forward is True and not verdict.rewritten
        return
    if key == METADATA:  # brokers and cluster are still asked for, no topic is named
        assert verdict.forward is not None and verdict.forward is not True
        assert verdict.forward.topics == () and verdict.merge is not None
        empty = sample_request(apis.response_schema(key, version), "secret")
        merged = verdict.merge(dataclasses.replace(empty, topics=()))
        assert 29 in set(error_codes(merged).values())
        return
    assert verdict.local is not None, "a denied request must not reach a broker"
    assert verdict.forward is None
    frame = encode_response(key, version, 1, verdict.local)
    decoded = decode_response(memoryview(frame)[4:], key, version)
    if (key, version) in EMPTY_WHEN_DENIED:
        assert decoded.results == ()
        return
    assert set(error_codes(decoded).values()) & AUTH_ERRORS


@pytest.mark.parametrize(
    ("key", "version"), CASES, ids=[f"{apis.api_name(k)}-v{v}" for k, v in CASES]
)
def test_super_user_is_forwarded_untouched(
    key: int, version: int, make_authorizer: MakeAuthorizer
) -> None:
    authorizer = make_authorizer([], super_users=["User:admin"])
    enforcer = Enforcer(authorizer, ClientIdentity("l", "10.0.0.9", 4000, "User:admin"))
    request = sample_request(apis.request_schema(key, version), "secret")
    verdict = enforcer.decide(key, request, apis.response_schema(key, version))
    if key in ACL_APIS:  # answered by the gateway from its own policy store
        assert verdict.local is not None and verdict.forward is None
        return
    if (
        key in UNITS
        and UNITS[key].__name__ in ("fetch", "offset_for_leader_epoch", "add_partitions_to_txn")
        and verdict.local is not None
    ):
        # replica fetches and broker-only versions are refused even for super users
        return
    assert verdict.forward is True and not verdict.rewritten and verdict.local is None
