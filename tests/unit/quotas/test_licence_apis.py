"""Plan limits decided on config values as the broker reads them (decision 0023).

A tenant's topic configs in CreateTopics, AlterConfigs and IncrementalAlterConfigs
are parsed with Java's rules before the plan is asked: ``"\\x01-1"`` is infinite
retention to the broker, so it is to the gateway; what the broker would refuse, or
the gateway cannot read, is INVALID_CONFIG (40), never forwarded."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.alter_configs.v2.request import AlterableConfig as PlainConfig
from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as PlainResource
from kio.schema.alter_configs.v2.response import AlterConfigsResponse
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
from kio.static.primitive import i8, i16, i32, i32Timedelta

from gateway.enforcement.verdict import Verdict
from gateway.kafkaconfig import InvalidConfig, parse_topic_value
from gateway.quotas import PlanConfig
from gateway.quotas.licence_apis import Licence, decide
from gateway.quotas.model import Plan

MAX_RETENTION = 86_400_000
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC, BROKER = 2, 4


def licence(**limits: int) -> Licence:
    plan = Plan("small", PlanConfig(max_retention_ms=MAX_RETENTION, **limits))
    return Licence("acme", plan, "{tenant}.", 0.0, lambda _: None, "User:acme-admin")


async def no_topics() -> Mapping[str, int]:
    return {}


def outcome(verdict: Verdict, field: str, forwarded: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Each refused entry's (error code, message); the forwarded ones must be ``forwarded``."""
    if verdict.defer is not None:
        verdict = verdict.defer.finish({})
    if verdict.local is not None:
        assert not forwarded
        entries = getattr(verdict.local, field)
    elif verdict.forward is True:
        return {}
    else:
        names = [getattr(e, "name", None) or e.resource_name for e in _sent(verdict)]
        assert names == list(forwarded)
        entries = getattr(verdict.merge(_empty(verdict)), field)  # type: ignore[misc]
    return {getattr(e, "name", None) or e.resource_name: (int(e.error_code), e.error_message)
            for e in entries}  # fmt: skip


def _sent(verdict: Verdict) -> Sequence[Any]:
    forward = verdict.forward
    return forward.topics if isinstance(forward, CreateTopicsRequest) else forward.resources


def _empty(verdict: Verdict) -> Any:
    zero = datetime.timedelta(0)
    if isinstance(verdict.forward, CreateTopicsRequest):
        return CreateTopicsResponse(throttle_time=zero, topics=())
    if isinstance(verdict.forward, AlterConfigsRequest):
        return AlterConfigsResponse(throttle_time=zero, responses=())
    return IncrementalAlterConfigsResponse(throttle_time=zero, responses=())


def create(*topics: tuple[str, Sequence[tuple[str, str | None]]]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=name, num_partitions=i32(1), replication_factor=i16(3), assignments=(),
                configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs),
            )
            for name, configs in topics
        ),
        timeout=TIMEOUT, validate_only=False,
    )  # fmt: skip


def incremental(
    *resources: tuple[str, Sequence[tuple[str, str | None, int]]], kind: int = TOPIC
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=tuple(
            AlterConfigsResource(resource_type=i8(kind), resource_name=name, configs=tuple(
                AlterableConfig(name=k, config_operation=i8(op), value=v) for k, v, op in configs
            ))
            for name, configs in resources
        ),
        validate_only=False,
    )  # fmt: skip


def plain(name: str, configs: Sequence[tuple[str, str | None]]) -> AlterConfigsRequest:
    return AlterConfigsRequest(
        resources=(PlainResource(resource_type=i8(TOPIC), resource_name=name, configs=tuple(
            PlainConfig(name=k, value=v) for k, v in configs)),),
        validate_only=False,
    )  # fmt: skip


def test_create_topics_decides_on_the_value_the_broker_stores() -> None:
    request = create(
        ("acme.ctrl", [("retention.ms", "\x01-1")]),  # the hostile tenant's value: -1
        ("acme.tab", [("retention.ms", "\t-1 ")]),
        ("acme.plus", [("retention.ms", "+5")]),  # 5 ms: within the plan
        ("acme.arabic", [("retention.ms", "\u0663")]),  # 3 ms
        ("acme.under", [("retention.ms", "1_000")]),
        ("acme.exp", [("retention.ms", "1e3")]),
        ("acme.huge", [("retention.ms", "9223372036854775808")]),
        ("acme.empty", [("retention.ms", "")]),
        ("acme.null", [("retention.ms", None)]),
        ("acme.typo", [("retention.mss", "1000")]),
        ("acme.twice", [("retention.ms", "1000"), ("retention.ms", "-1")]),
        ("acme.other", [("segment.bytes", "\x1f1")]),  # below segment.bytes' minimum
    )
    result = outcome(decide(19, request, CreateTopicsResponse, licence(), no_topics), "topics",
                     ["acme.plus", "acme.arabic"])  # fmt: skip
    assert {name: code for name, (code, _) in result.items()} == {
        "acme.ctrl": 44, "acme.tab": 44, "acme.under": 40, "acme.exp": 40, "acme.huge": 40,
        "acme.empty": 40, "acme.null": 40, "acme.typo": 40, "acme.twice": 40, "acme.other": 40,
    }  # fmt: skip
    assert "infinite retention (-1)" in result["acme.ctrl"][1]
    assert "Unknown topic config name: 'retention.mss'" in result["acme.typo"][1]
    assert "Invalid value '1_000' for configuration retention.ms" in result["acme.under"][1]
    assert "duplicate config key" in result["acme.twice"][1]


def test_the_forwarded_request_is_the_tenants_own() -> None:
    request = create(("acme.a", [("retention.ms", " 3600000\t")]), ("acme.b", [("x", "1")]))
    verdict = decide(19, request, CreateTopicsResponse, licence(), no_topics)
    assert verdict.forward.topics == request.topics[:1]  # unchanged bytes: the broker parses alike


async def test_invalid_topics_need_no_count_and_count_for_nothing() -> None:
    counted = licence(max_topics=1)
    refused = decide(19, create(("acme.x", [("bad.key", "1")])), CreateTopicsResponse, counted,
                     no_topics)  # fmt: skip
    assert refused.defer is None and int(refused.local.topics[0].error_code) == 40
    both = decide(19, create(("acme.x", [("bad.key", "1")]), ("acme.y", [])),
                  CreateTopicsResponse, counted, no_topics)  # fmt: skip
    assert both.defer is not None
    result = outcome(both.defer.finish(await both.defer.run()), "topics", ["acme.y"])
    assert result == {"acme.x": (40, "Unknown topic config name: 'bad.key'")}


def test_incremental_alter_configs_reads_values_and_operations() -> None:
    request = incremental(
        ("acme.ctrl", [("retention.ms", "\x01-1", SET)]),
        ("acme.long", [("retention.ms", "\x1f86400001", SET)]),
        ("acme.ok", [("retention.ms", "\x0086400000", SET), ("cleanup.policy", "compact", APPEND)]),
        ("acme.reset", [("retention.ms", None, DELETE)]),  # the broker's default, as at creation
        ("acme.append", [("retention.ms", "1", APPEND)]),
        ("acme.subtract", [("retention.ms", "1", SUBTRACT)]),
        ("acme.unknown", [("no.such", None, DELETE)]),
        ("acme.op", [("retention.ms", "1", 9)]),
        ("acme.null", [("retention.ms", None, SET)]),
    )
    result = outcome(decide(44, request, IncrementalAlterConfigsResponse, licence(), no_topics),
                     "responses", ["acme.ok", "acme.reset"])  # fmt: skip
    assert {name: code for name, (code, _) in result.items()} == {
        "acme.ctrl": 44, "acme.long": 44, "acme.append": 40, "acme.subtract": 40,
        "acme.unknown": 40, "acme.op": 40, "acme.null": 40,
    }  # fmt: skip
    assert "asked for 86400001" in result["acme.long"][1]
    assert (
        "Can't APPEND to key retention.ms because its type is not LIST"
        in (result["acme.append"][1])
    )


def test_other_resources_are_not_topic_configs() -> None:
    request = incremental(("1", [("log.retention.ms", "-1", SET)]), kind=BROKER)
    assert decide(44, request, IncrementalAlterConfigsResponse, licence(), no_topics).forward


@pytest.mark.parametrize(
    ("configs", "code"),
    [([("retention.ms", "\x01-1")], 44), ([("retention.ms", None)], 40),
     ([("retention.ms", "\u0663\u0666\u0660\u0660\u0660\u0660\u0660")], 0),  # 3600000
     ([("segment.ms", "1")], 0)],
)  # fmt: skip
def test_alter_configs_reads_values_the_same_way(
    configs: list[tuple[str, str | None]], code: int
) -> None:
    verdict = decide(33, plain("acme.t", configs), AlterConfigsResponse, licence(), no_topics)
    if code == 0:
        assert verdict.forward is True and verdict.local is None
    else:
        assert int(verdict.local.responses[0].error_code) == code


@settings(max_examples=300)
@given(st.text(st.characters(max_codepoint=0x700), max_size=12) | st.from_regex(
    r"[\x00- ]{0,2}[+-]?[0-9\u0660-\u0669]{1,20}[\x00- ]{0,2}", fullmatch=True))  # fmt: skip
def test_nothing_beyond_the_plan_reaches_the_broker(value: str) -> None:
    """Whatever the text: forwarded only if the broker reads it as within the plan."""
    try:
        parsed: object = parse_topic_value("retention.ms", value)
    except InvalidConfig:
        parsed = None
    for request, rc, key, field in (
        (create(("acme.t", [("retention.ms", value)])), CreateTopicsResponse, 19, "topics"),
        (incremental(("acme.t", [("retention.ms", value, SET)])),
         IncrementalAlterConfigsResponse, 44, "responses"),
    ):  # fmt: skip
        verdict = decide(key, request, rc, licence(), no_topics)
        if verdict.forward is True:
            assert isinstance(parsed, int) and 0 <= parsed <= MAX_RETENTION
        else:
            (entry,) = getattr(verdict.local, field)
            assert int(entry.error_code) == (40 if parsed is None else 44)


async def test_an_invalid_config_stays_invalid_when_the_topic_list_is_unavailable() -> None:
    async def broken() -> Mapping[str, int]:
        raise OSError("connection refused")

    request = create(("acme.x", [("bad.key", "1")]), ("acme.y", []))
    verdict = decide(19, request, CreateTopicsResponse, licence(max_topics=5), broken)
    assert verdict.defer is not None
    try:
        outcome_: object = await verdict.defer.run()
    except OSError as exc:
        outcome_ = exc
    local = verdict.defer.finish(outcome_).local
    assert {t.name: int(t.error_code) for t in local.topics} == {"acme.x": 40, "acme.y": -1}
