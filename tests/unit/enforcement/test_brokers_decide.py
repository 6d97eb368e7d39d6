"""``authorization.gateway_checks: false``: the brokers decide what reaches them, the
gateway still decides what it answers from its own stores (ACLs, client quotas)."""

from __future__ import annotations

from gateway.enforcement import LOCAL_APIS, Enforcer
from gateway.identity import ClientIdentity
from gateway.protocol import apis

from ..conftest import MakeAuthorizer
from .samples import sample_request

WHO = ClientIdentity("l", "10.0.0.9", 4000, "User:mallory")


def test_only_the_gateways_own_answers_are_decided_here(make_authorizer: MakeAuthorizer) -> None:
    enforcer = Enforcer(make_authorizer([]), WHO, brokers_decide=True)  # deny-all policy
    for key in sorted(apis.gateway_apis()):
        if Enforcer.advertised(key) is None:
            continue
        version = apis.gateway_apis()[key].max_version
        request = sample_request(apis.request_schema(key, version), "victim.x")
        verdict = enforcer.decide(key, request, apis.response_schema(key, version))
        if key in LOCAL_APIS:  # no broker ever sees these: refused by the policy
            assert verdict.local is not None and verdict.forward is None, apis.api_name(key)
            assert verdict.denied, apis.api_name(key)
        else:  # the broker, as the tenant's own principal, decides
            assert verdict.forward is True and not verdict.rewritten, apis.api_name(key)
    assert enforcer.reader() is None


def test_with_checks_on_the_same_policy_refuses(make_authorizer: MakeAuthorizer) -> None:
    enforcer = Enforcer(make_authorizer([]), WHO)
    request = sample_request(apis.request_schema(0, 9), "victim.x")
    assert enforcer.decide(0, request, apis.response_schema(0, 9)).local is not None
    reader = enforcer.reader()
    assert reader is not None and not reader("victim.x")
