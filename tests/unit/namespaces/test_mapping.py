"""Every mapped API x version, both ways, on messages with a name in every field: the
tenant's names reach the brokers under its prefix, the brokers' answers come back in
the tenant's names, and another tenant's resources are left out of them."""

from __future__ import annotations

import uuid

import pytest

from gateway.namespaces.mappers import map_request, map_response
from gateway.namespaces.names import NameRefused, Namespace
from gateway.namespaces.paths import message_paths
from gateway.namespaces.table import NAMED_APIS, offered_max
from gateway.protocol import apis

from .samples import name_paths, sample, values_at

NS = Namespace("acme", "acme.")
CASES = [
    (key, version)
    for key in sorted(NAMED_APIS)
    for version in range(
        apis.gateway_apis()[key].min_version,
        (offered_max(key, apis.gateway_apis()[key].max_version) or -1) + 1,
    )
]
CONFIG_APIS = (32, 33, 44)


@pytest.mark.parametrize(("key", "version"), CASES)
def test_request_names_get_the_prefix(key: int, version: int) -> None:
    request = sample(apis.request_schema(key, version), "orders")
    mapped = map_request(NS, key, request)
    entry = NAMED_APIS[key]
    for path in entry.request:
        for value in values_at(mapped, path):
            assert value == "acme.orders", (path, value)
    for path in entry.not_names:
        for value in values_at(mapped, path):
            assert value in ("orders", uuid.UUID(int=7)) or not isinstance(value, str), path
    if key in CONFIG_APIS:
        assert {r.resource_name for r in mapped.resources} == {"acme.orders"}
    if key == 66 and version >= 2:
        assert mapped.transactional_id_pattern == r"acme\.(?:orders)"


@pytest.mark.parametrize(("key", "version"), CASES)
def test_response_names_lose_the_prefix(key: int, version: int) -> None:
    cls = apis.response_schema(key, version)
    mapped = map_response(NS, key, sample(cls, "acme.orders"))
    entry = NAMED_APIS[key]
    paths = [*entry.response, *message_paths(cls)]
    if key in CONFIG_APIS:
        paths.append(("results" if key == 32 else "responses") + "[].resource_name")
    present = set(name_paths(cls)) | set(message_paths(cls))
    for path in paths:
        if path not in present:
            continue  # a field of other versions
        values = values_at(mapped, path)
        assert values, path
        assert all(v == "orders" for v in values), (path, values)


@pytest.mark.parametrize(("key", "version"), CASES)
def test_foreign_names_are_left_out(key: int, version: int) -> None:
    cls = apis.response_schema(key, version)
    mapped = map_response(NS, key, sample(cls, "other.orders"))
    entry = NAMED_APIS[key]
    paths = list(entry.response)
    if key in CONFIG_APIS:
        paths.append(("results" if key == 32 else "responses") + "[].resource_name")
    for path in paths:
        assert all(v == "" for v in values_at(mapped, path)), path


@pytest.mark.parametrize("key", CONFIG_APIS)
def test_config_resources_other_than_topics_and_groups_are_untouched(key: int) -> None:
    version = apis.gateway_apis()[key].max_version
    broker = sample(apis.request_schema(key, version), "1", resource_type=4)
    assert map_request(NS, key, broker) == broker
    answer = sample(apis.response_schema(key, version), "1", resource_type=4)
    assert map_response(NS, key, answer) == answer


def test_delete_topics_by_id_is_refused() -> None:
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState

    by_id = DeleteTopicsRequest(
        topics=(DeleteTopicState(name=None, topic_id=uuid.uuid4()),), timeout=_ms(1000)
    )
    with pytest.raises(NameRefused):
        map_request(NS, 20, by_id)


def test_illegal_topic_names_are_refused_on_create() -> None:
    cls = apis.request_schema(19, 7)
    for bad in ("", ".", ".."):
        with pytest.raises(NameRefused):
            map_request(NS, 19, sample(cls, bad))


def _ms(value: int) -> object:
    import datetime

    return datetime.timedelta(milliseconds=value)


def test_kip848_regex_subscription_matches_only_own_topics() -> None:
    cls = apis.request_schema(68, 1)
    mapped = map_request(NS, 68, sample(cls, "orders").__class__(
        **{**_fields(sample(cls, "orders")), "subscribed_topic_regex": ".*"}
    ))  # fmt: skip
    assert mapped.subscribed_topic_regex == r"acme\.(?:.*)"
    answer = sample(apis.response_schema(69, 0), "acme.g")
    member = (
        answer.groups[0]
        .members[0]
        .__class__(
            **{**_fields(answer.groups[0].members[0]), "subscribed_topic_regex": r"acme\.(?:.*)"}
        )
    )
    group = answer.groups[0].__class__(**{**_fields(answer.groups[0]), "members": (member,)})
    described = map_response(NS, 69, answer.__class__(**{**_fields(answer), "groups": (group,)}))
    assert {m.subscribed_topic_regex for g in described.groups for m in g.members} == {".*"}


def test_describe_topic_partitions_cursor_on_a_foreign_topic_ends_the_listing() -> None:
    answer = sample(apis.response_schema(75, 0), "other.x")
    assert map_response(NS, 75, answer).next_cursor is None
    own = map_response(NS, 75, sample(apis.response_schema(75, 0), "acme.x"))
    assert own.next_cursor is not None and own.next_cursor.topic_name == "x"


def _fields(entity: object) -> dict[str, object]:
    import dataclasses

    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}  # type: ignore[arg-type]
