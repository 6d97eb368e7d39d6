"""The namespace filter in a filter chain: who it applies to, what it forwards and
answers, and what ApiVersions offers a namespaced connection."""

from __future__ import annotations

from typing import Any

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v12 import request as mreq
from kio.schema.metadata.v12 import response as mres

from gateway.filters.chain import BoundChain, FilterChain, Rejected
from gateway.identity import ClientIdentity
from gateway.namespaces.directory import Directory
from gateway.namespaces.filter import NamespaceFilter
from gateway.namespaces.settings import NamespacesConfig
from gateway.protocol import apis

from .samples import sample

STORE: set[str] = {"globex"}


def bound(tenant: str | None, listener: str = "public", **config: Any) -> BoundChain:
    settings = NamespacesConfig(
        **{"transparent_tenants": ["acme"], "listeners": ["public"], **config}
    )
    chain = FilterChain([NamespaceFilter(Directory(settings, STORE.__contains__))])
    identity = ClientIdentity(listener, "127.0.0.1", 1, principal="User:x", tenant=tenant)
    return chain.bind(identity)


def metadata(*names: str) -> Any:
    topics = tuple(mreq.MetadataRequestTopic(topic_id=None, name=n) for n in names)  # type: ignore[arg-type]
    return sample(mreq.MetadataRequest, "x").__class__(
        topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def test_only_namespaced_connections_are_filtered() -> None:
    assert bound("acme").wants(apis.METADATA) and bound("acme").wants_response(apis.METADATA)
    assert bound("globex").wants(apis.METADATA)  # transparent in the tenant store
    assert not bound("initech").wants(apis.METADATA)  # prefixed names
    assert not bound(None).wants(apis.METADATA)  # no tenant: operators, super users
    assert not bound("acme", listener="ops").wants(apis.METADATA)  # not this listener
    assert bound("initech", transparent_tenants=["*"]).wants(apis.PRODUCE)


def test_request_and_response_are_mapped() -> None:
    chain = bound("acme")
    forwarded = chain.request(3, 12, 7, lambda: metadata("orders", "other.orders"))
    assert [t.name for t in forwarded.topics] == ["acme.orders", "acme.other.orders"]
    answer = sample(mres.MetadataResponse, "x")
    own = sample(mres.MetadataResponseTopic, "acme.orders")
    foreign = sample(mres.MetadataResponseTopic, "other.orders")
    back = chain.response(
        3, 12, 7, answer.__class__(**{**_fields(answer), "topics": (own, foreign)})
    )
    assert [t.name for t in back.topics] == ["orders"]


def test_a_request_for_all_topics_is_answered_with_own_topics_only() -> None:
    chain = bound("acme")
    everything = metadata().__class__(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert chain.request(3, 12, 1, lambda: everything) is None  # nothing to rename
    topics = tuple(sample(mres.MetadataResponseTopic, n) for n in ("acme.a", "beta.b", "acmex.c"))
    answer = sample(mres.MetadataResponse, "x")
    back = chain.response(3, 12, 1, answer.__class__(**{**_fields(answer), "topics": topics}))
    assert [t.name for t in back.topics] == ["a"]


def test_illegal_names_are_refused_before_the_broker() -> None:
    request = CreateTopicsRequest(
        topics=(sample(CreatableTopic, ".."),), timeout=sample(CreateTopicsRequest, "x").timeout,
        validate_only=False,
    )  # fmt: skip
    outcome = bound("acme").request(19, 7, 3, lambda: request)
    assert isinstance(outcome, Rejected) and int(outcome.code) == 17


def test_api_versions_offer_only_mapped_apis() -> None:
    specs = apis.gateway_apis()
    namespaced = bound("acme")
    assert namespaced.narrows
    assert namespaced.advertised(29, specs[29]) is None  # DescribeAcls: not mapped
    assert namespaced.advertised(3, specs[3]) == specs[3]
    produce = namespaced.advertised(0, specs[0])
    assert produce is not None and produce.max_version == 12
    assert namespaced.advertised(60, specs[60]) == specs[60]  # DescribeCluster: no names
    # before authentication, on a listener namespaces apply to: fail closed
    assert bound(None).advertised(29, specs[29]) is None
    # other listeners and other tenants: as without namespaces
    assert bound(None, listener="ops").advertised(29, specs[29]) == specs[29]
    assert bound("initech").advertised(29, specs[29]) == specs[29]


def _fields(entity: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}
