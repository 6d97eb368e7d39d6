"""examples/topic_guard.py: the topic-name guard, driven with kio requests and a
``RequestCall`` built by hand (no session, no sockets)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from kio.schema.create_topics.v2.request import CreatableTopic as CreatableTopicV2
from kio.schema.create_topics.v2.request import CreateTopicsRequest as CreateTopicsRequestV2
from kio.schema.create_topics.v2.response import CreateTopicsResponse as CreateTopicsResponseV2
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v3.request import MetadataRequest as MetadataRequestV3
from kio.schema.metadata.v3.request import MetadataRequestTopic as MetadataTopicV3
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32

from examples.topic_guard import TopicNameGuard
from gateway.filters.api import FilterContext, FilterError, RequestCall
from gateway.filters.chain import FilterChain, Rejected
from gateway.filters.loader import build_filter
from gateway.filters.settings import FilterConfig
from gateway.identity import ClientIdentity
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    parse_request_head,
    response_correlation_id,
)
from gateway.protocol.refusal import refuse

PATTERN = "[a-z][a-z0-9-]*[.][a-z0-9.-]+"  # <team>.<name>
ALICE = ClientIdentity("public", "10.0.0.7", 50000, "User:alice", tenant="acme")
ADMIN = ClientIdentity("public", "10.0.0.8", 50001, "User:platform-admin")


def guard(**config: Any) -> TopicNameGuard:
    return TopicNameGuard({"pattern": PATTERN, **config})


def topic(name: str) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(1),
        replication_factor=i16(3),
        assignments=(),
        configs=(),
    )


def create(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=tuple(topic(n) for n in names))


def call_for(body: Any, identity: ClientIdentity = ALICE) -> RequestCall:
    api_key = int(type(body).__api_key__)
    context = FilterContext(identity, logging.getLogger("kgw.filters.test"))
    return RequestCall(api_key, int(type(body).__version__), 7, context, lambda: body)


def never_decoded(api_key: int, identity: ClientIdentity) -> RequestCall:
    def decode() -> Any:
        raise AssertionError("the request was decoded")

    context = FilterContext(identity, logging.getLogger("kgw.filters.test"))
    return RequestCall(api_key, 7, 7, context, decode)


def test_good_names_pass_untouched() -> None:
    call = call_for(create("payments.orders", "payments.refunds-v2"))
    guard().on_request(call)
    assert call.rejection is None
    assert not call.replaced


def test_a_bad_name_refuses_the_request_with_invalid_topic_and_names_it() -> None:
    call = call_for(create("payments.orders", "Payments.Orders", "scratch"))
    guard().on_request(call)
    assert call.rejection is not None
    code, message = call.rejection
    assert code == ErrorCode.invalid_topic_exception
    assert int(code) == 17
    assert message is not None
    assert "'Payments.Orders', 'scratch'" in message
    assert "'payments.orders'" not in message  # only the offending names are listed
    assert PATTERN in message  # the default message says what is expected


def test_the_whole_name_must_match() -> None:
    g = guard()
    assert g.allows("team.topic")
    assert not g.allows("team.topic!")  # a prefix match is not enough
    assert not g.allows("Team.topic")
    assert not g.allows("topic")


def test_the_operators_message_is_used() -> None:
    call = call_for(create("Bad"))
    guard(message="topic names are <team>.<name>, in lower case").on_request(call)
    assert call.rejection == (17, "topic names are <team>.<name>, in lower case (refused: 'Bad')")


def test_a_long_list_of_bad_names_is_cut_short() -> None:
    call = call_for(create(*(f"BAD{i}" for i in range(25)), "BAD0"))
    guard().on_request(call)
    assert call.rejection is not None
    message = call.rejection[1] or ""
    assert "'BAD9'" in message and "'BAD10'" not in message
    assert message.endswith("and 15 more)")  # 25 distinct names: a repeat counts once


def test_the_client_sees_the_error_on_every_topic_of_its_request() -> None:
    """What the session answers for a rejection: ``refuse`` in the request's version."""
    request = create("payments.orders", "Bad")
    call = call_for(request)
    guard().on_request(call)
    assert call.rejection is not None
    code, message = call.rejection
    answer = refuse(request, CreateTopicsResponse, ErrorCode(code), message)
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        ("payments.orders", ErrorCode.invalid_topic_exception, message),
        ("Bad", ErrorCode.invalid_topic_exception, message),
    ]


def test_older_versions_are_guarded_too() -> None:
    request = CreateTopicsRequestV2(
        topics=(
            CreatableTopicV2(
                name=TopicName("Bad"), num_partitions=i32(1), replication_factor=i16(1),
                assignments=(), configs=(),
            ),
        ),
        timeout=create().timeout,
        validate_only=True,  # a dry run gets the same answer
    )  # fmt: skip
    call = call_for(request)
    guard().on_request(call)
    assert call.rejection is not None
    answer = refuse(request, CreateTopicsResponseV2, ErrorCode(call.rejection[0]))
    assert [t.error_code for t in answer.topics] == [ErrorCode.invalid_topic_exception]


def test_an_exempt_principal_is_not_even_decoded() -> None:
    g = guard(exempt_principals=["User:platform-admin"])
    call = never_decoded(19, ADMIN)
    g.on_request(call)
    assert call.rejection is None
    with pytest.raises(AssertionError, match="decoded"):
        g.on_request(never_decoded(19, ALICE))  # anyone else's request is read


def _name(name: str | None) -> TopicName | None:
    return None if name is None else TopicName(name)


def metadata(*names: str | None, auto: bool = True) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=uuid.uuid4(), name=_name(n)) for n in names),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )


def test_metadata_may_not_auto_create_a_bad_name() -> None:
    call = call_for(metadata("team.ok", "Bad"))
    guard().on_request(call)
    assert call.rejection is None
    assert call.replaced
    assert call.body.allow_auto_topic_creation is False
    assert [t.name for t in call.body.topics] == ["team.ok", "Bad"]  # still asked about


@pytest.mark.parametrize(
    "body",
    [
        metadata("team.ok", None),  # v10+: a topic by id has no name
        metadata("Bad", auto=False),  # nothing would be created
        MetadataRequest(topics=None, include_topic_authorized_operations=False),  # all topics
        MetadataRequestV3(
            topics=(MetadataTopicV3(name=TopicName("Bad")),)
        ),  # v0-3: no flag to clear
    ],
    ids=["good-or-by-id", "no-auto-create", "all-topics", "v3"],
)
def test_metadata_left_alone(body: Any) -> None:
    call = call_for(body)
    guard().on_request(call)
    assert call.rejection is None
    assert not call.replaced


BAD_CONFIGS: list[tuple[dict[str, Any], str]] = [
    ({}, "pattern is required"),
    ({"pattern": ""}, "pattern is required"),
    ({"pattern": 42}, "pattern is required"),
    ({"pattern": "[a-z"}, "pattern '[a-z' is not a valid regular expression"),
    ({"pattern": PATTERN, "mesage": "typo"}, "unknown setting mesage"),
    ({"pattern": PATTERN, "message": ""}, "message must be a non-empty string"),
    ({"pattern": PATTERN, "exempt_principals": "User:a"}, "exempt_principals must be a list"),
]


@pytest.mark.parametrize(("config", "reason"), BAD_CONFIGS)
def test_a_bad_config_is_refused_with_the_reason(config: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[")):
        TopicNameGuard(config)


def test_the_loader_names_the_entry_when_the_pattern_is_broken() -> None:
    config = FilterConfig(module="examples.topic_guard:TopicNameGuard", config={"pattern": "("})
    with pytest.raises(FilterError) as info:
        build_filter(3, config)
    text = str(info.value)
    assert text.startswith("filters[3]: examples.topic_guard:TopicNameGuard refused its config")
    assert "not a valid regular expression" in text


def test_the_loader_builds_it_from_its_module_path() -> None:
    config = FilterConfig(module="examples.topic_guard:TopicNameGuard", config={"pattern": "x+"})
    made = build_filter(0, config)
    assert isinstance(made, TopicNameGuard)
    assert made.name == "topic-name-guard"
    assert made.api_keys == frozenset({3, 19})
    assert made.allows("xxx") and not made.allows("y")


def test_on_the_wire_the_client_is_answered_and_nothing_is_forwarded() -> None:
    data = encode_request(19, 7, 42, "adminclient-1", create("payments.orders", "Bad"))
    outcome = FilterChain([guard()]).bind(ALICE).request_frame(data, 19, 7, 42)
    assert isinstance(outcome, Rejected) and outcome.name == "topic-name-guard"
    assert outcome.reply is not None
    payload = memoryview(outcome.reply)[4:]
    assert response_correlation_id(payload) == 42
    answer = decode_response(payload, 19, 7, CreateTopicsResponse)
    assert {(t.name, t.error_code) for t in answer.topics} == {
        ("payments.orders", ErrorCode.invalid_topic_exception),
        ("Bad", ErrorCode.invalid_topic_exception),
    }
    assert all(t.error_message and "'Bad'" in t.error_message for t in answer.topics)


def test_on_the_wire_a_good_request_is_forwarded_as_its_own_bytes() -> None:
    data = encode_request(19, 7, 42, "adminclient-1", create("payments.orders"))
    assert FilterChain([guard()]).bind(ALICE).request_frame(data, 19, 7, 42) is data


def test_on_the_wire_metadata_goes_on_without_auto_creation() -> None:
    data = encode_request(3, 12, 43, "producer-1", metadata("Bad"))
    forwarded = FilterChain([guard()]).bind(ALICE).request_frame(data, 3, 12, 43)
    assert isinstance(forwarded, bytes) and forwarded != data
    payload = memoryview(forwarded)[4:]
    head = parse_request_head(payload)
    assert (head.api_key, head.correlation_id, head.client_id) == (3, 43, "producer-1")
    sent = decode_request(head, payload)
    assert isinstance(sent, MetadataRequest)
    assert sent.allow_auto_topic_creation is False
    assert [t.name for t in sent.topics or ()] == ["Bad"]
