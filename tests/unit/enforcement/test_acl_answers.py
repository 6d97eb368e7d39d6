"""The ACL admin APIs refuse a principal without the cluster permission as Kafka's
AclApis does, the same way at every version: CLUSTER_AUTHORIZATION_FAILED with a
message, at the top level (DescribeAcls) or on every creation / filter."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.addresses.topology import PublicMap
from gateway.enforcement import Enforcer
from gateway.enforcement.acl_admin import CLUSTER_DENIED_MESSAGE
from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.protocol.codec import decode_response, encode_request
from gateway.session import Session

from ..conftest import MakeAuthorizer
from .samples import sample_request

BOB = ClientIdentity("public", "10.0.0.3", 3, "User:bob")
# bob may do a lot, but neither DESCRIBE nor ALTER on the cluster
POLICY = ["p, User:bob, TOPIC, PREFIXED, *, ALL, *, allow"]
CASES = [(k, v) for k in (29, 30, 31) for v in sorted(apis.decodable_versions(k))]


def _answer(session: Session, key: int, version: int) -> Any:
    request = sample_request(apis.request_schema(key, version), "orders")
    assert session.on_request(encode_request(key, version, 9, "c", request)) is None
    (reply,) = session.take_ready()
    return decode_response(memoryview(reply)[4:], key, version)


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{k}-v{v}" for k, v in CASES])
def test_without_the_cluster_permission_every_version_gets_31_and_a_message(
    key: int, version: int, mapping: PublicMap, make_authorizer: MakeAuthorizer
) -> None:
    session = Session(mapping, BOB, Enforcer(make_authorizer(POLICY), BOB))
    response = _answer(session, key, version)
    if key == 29:  # DescribeAcls: no ACL listed, the error at the top level
        assert response.resources == ()
        answers = [response]
    else:
        answers = list(response.results if key == 30 else response.filter_results)
        assert len(answers) == 1
    for answer in answers:
        assert int(answer.error_code) == 31
        assert answer.error_message == CLUSTER_DENIED_MESSAGE
