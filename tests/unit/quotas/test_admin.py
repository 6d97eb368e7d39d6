"""QuotaAdmin: Kafka's ClientQuotas APIs from the gateway's store, and plan licence limits,
composed with authorization. No sockets: deferred work is run here with asyncio."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntryData, OpData
from kio.schema.alter_client_quotas.v1.request import EntityData as AlterEntity
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.alter_configs.v2.request import AlterableConfig as PlainConfig
from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as PlainResource
from kio.schema.alter_configs.v2.response import AlterConfigsResponse
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_partitions.v3.response import CreatePartitionsResponse
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.create_topics.v7.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
from kio.schema.describe_client_quotas.v1.response import DescribeClientQuotasResponse
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
from kio.static.primitive import i8, i16, i32, i32Timedelta

from gateway.enforcement import Enforcer
from gateway.enforcement.verdict import PASS, Verdict
from gateway.identity import ClientIdentity
from gateway.quotas import QuotaConfig, QuotaEngine, QuotaKind, Subject, Target
from gateway.quotas.admin import QuotaAdmin
from gateway.quotas.store import FileQuotaStore, QuotaStore, StoreError

from ..conftest import MakeAuthorizer

ADMIN = ClientIdentity("l", "10.0.0.1", 1, "User:admin", api_key_id="k-admin", tenant="acme")
PLAN = {"max_topics": 3, "max_partitions_per_topic": 4, "max_total_partitions": 8,
        "max_retention_ms": 86_400_000}  # fmt: skip
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def engine_for(tmp_path: Path, **config: Any) -> QuotaEngine:
    cfg = QuotaConfig.model_validate(
        {"store_file": tmp_path / "quotas.json", "default_plan": "small",
         "plans": {"small": PLAN}, **config}
    )  # fmt: skip
    return QuotaEngine.from_config(cfg)


async def resolve(verdict: Verdict) -> Verdict:
    """What the network layer does with a deferred verdict."""
    if verdict.defer is None:
        return verdict
    try:
        outcome: object = await verdict.defer.run()
    except Exception as exc:
        outcome = exc
    return verdict.defer.finish(outcome)


def topics_source(topics: Mapping[str, int]) -> Any:
    async def fetch() -> Mapping[str, int]:
        return topics

    return fetch


def creatable(name: str, partitions: int, retention: str | None = None) -> CreatableTopic:
    configs = (
        () if retention is None else (CreatableTopicConfig(name="retention.ms", value=retention),)
    )
    return CreatableTopic(
        name=name, num_partitions=i32(partitions), replication_factor=i16(3), assignments=(),
        configs=configs,
    )  # fmt: skip


def create_request(*topics: CreatableTopic, validate_only: bool = False) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=topics, timeout=TIMEOUT, validate_only=validate_only)


def broker_answer(request: CreateTopicsRequest) -> CreateTopicsResponse:
    """What a broker answers for the topics it was sent: all created."""
    return CreateTopicsResponse(
        throttle_time=datetime.timedelta(0),
        topics=tuple(
            CreatableTopicResult(
                name=t.name,
                topic_id=None,
                error_code=ErrorCode.none,
                error_message=None,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=(),
            )
            for t in request.topics
        ),
    )


def alter_request(*entries: tuple[str, str, list[tuple[str, float, bool]]]) -> Any:
    return AlterClientQuotasRequest(
        entries=tuple(
            EntryData(
                entity=(AlterEntity(entity_type=kind, entity_name=name),),
                ops=tuple(OpData(key=k, value=v, remove=r) for k, v, r in ops),
            )
            for kind, name, ops in entries
        ),
        validate_only=False,
    )


# -- ClientQuotas ------------------------------------------------------------------------


async def test_alter_is_deferred_attributed_and_then_described(tmp_path: Path) -> None:
    engine = engine_for(tmp_path)
    changes: list[tuple[str, str, str]] = []
    engine.store.add_hook(
        lambda actor, action, target, _b, _a: changes.append((actor, action, target))
    )
    admin = QuotaAdmin(engine, ADMIN, topics_source({}))
    request = alter_request(
        ("user", "alice", [("producer_byte_rate", 1_000_000, False),
                           ("consumer_byte_rate", 2_000_000, False)]),
        ("client-id", "ak_1", [("request_percentage", 50, False)]),
        ("user", None, [("producer_byte_rate", 5, False)]),  # type: ignore[list-item]
    )  # fmt: skip
    verdict = admin.decide(49, request, AlterClientQuotasResponse, PASS)
    assert verdict.defer is not None and verdict.forward is None  # nothing reaches a broker
    answer = (await resolve(verdict)).local
    assert [int(e.error_code) for e in answer.entries] == [0, 0, 42]
    assert "plans" in answer.entries[2].error_message
    stored = FileQuotaStore(tmp_path / "quotas.json").load().quotas
    assert stored[Target.parse("principal:User:alice")] == {
        "produce_bytes": 1_000_000, "fetch_bytes": 2_000_000,
    }  # fmt: skip
    assert stored[Target.parse("api-key:ak_1")] == {"requests": 50}
    assert changes == [
        ("User:admin", "quota_set", "quotas/principal:User:alice"),
        ("User:admin", "quota_set", "quotas/api-key:ak_1"),
    ]
    # The engine reloaded at once: a Describe right after sees the change, and it applies.
    limit = engine.limit(Subject("User:alice", None, None, "h"), QuotaKind.PRODUCE_BYTES)
    assert limit is not None and limit.rate == 1_000_000
    describe = DescribeClientQuotasRequest(
        components=(ComponentData(entity_type="user", match_type=i8(0), match="alice"),),
        strict=False,
    )
    described = admin.decide(48, describe, DescribeClientQuotasResponse, PASS).local
    assert int(described.error_code) == 0
    ((entry),) = described.entries
    assert {v.key: v.value for v in entry.values} == {
        "producer_byte_rate": 1_000_000, "consumer_byte_rate": 2_000_000,
    }  # fmt: skip


async def test_a_failing_store_is_an_error_per_entry_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Down(FileQuotaStore):
        def _modify(self, section: str, name: str, change: Any) -> tuple[Any, Any]:
            raise StoreError("the quota store in Redis is unavailable (ConnectionError)")

    cfg = QuotaConfig.model_validate({"store_file": tmp_path / "q.json"})
    store: QuotaStore = Down(tmp_path / "q.json")
    engine = QuotaEngine.from_config(cfg, store=store)
    admin = QuotaAdmin(engine, ADMIN, topics_source({}))
    request = alter_request(("user", "bob", [("producer_byte_rate", 10, False)]))
    answer = (await resolve(admin.decide(49, request, AlterClientQuotasResponse, PASS))).local
    assert [int(e.error_code) for e in answer.entries] == [-1]
    assert "unavailable" in answer.entries[0].error_message
    assert any(getattr(r, "event", None) == "quota_change_failed" for r in caplog.records)


async def test_work_that_raises_still_answers_every_entry(tmp_path: Path) -> None:
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({}))
    request = alter_request(
        ("user", "a", [("producer_byte_rate", 10, False)]),
        ("user", "b", [("producer_byte_rate", 10, False)]),
    )
    verdict = admin.decide(49, request, AlterClientQuotasResponse, PASS)
    assert verdict.defer is not None
    answer = verdict.defer.finish(TimeoutError()).local
    assert [int(e.error_code) for e in answer.entries] == [-1, -1]
    assert "TimeoutError" in answer.entries[0].error_message


def test_unauthorized_alter_never_reaches_the_store(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    engine = engine_for(tmp_path)
    enforcer = Enforcer(make_authorizer([]), ADMIN)  # no rule: denied
    admin = QuotaAdmin(engine, ADMIN, topics_source({}))
    request = alter_request(("user", "alice", [("producer_byte_rate", 1, False)]))
    authz = enforcer.decide(49, request, AlterClientQuotasResponse)
    verdict = admin.decide(49, request, AlterClientQuotasResponse, authz)
    assert verdict.defer is None and verdict.local is not None
    assert [int(e.error_code) for e in verdict.local.entries] == [31]
    assert engine.store.load().quotas == {}


# -- licence limits ----------------------------------------------------------------------


async def test_create_topics_within_and_beyond_the_plan_in_one_request(tmp_path: Path) -> None:
    engine = engine_for(tmp_path)
    admin = QuotaAdmin(engine, ADMIN, topics_source({"acme.old": 2, "globex.x": 6}))
    request = create_request(
        creatable("acme.a", 2),
        creatable("acme.huge", 6),  # beyond partitions per topic
        creatable("acme.long", 1, retention="-1"),  # infinite retention
        creatable("acme.b", 3),  # 3 topics, 2 + 2 + 3 = 7 partitions of 8: fine
        creatable("acme.c", 1),  # a 4th topic: beyond max_topics (3)
        creatable("globex.y", 1),  # not the tenant's namespace
    )
    verdict = await resolve(admin.decide(19, request, CreateTopicsResponse, PASS))
    assert verdict.rewritten
    assert [t.name for t in verdict.forward.topics] == ["acme.a", "acme.b"]
    merged = verdict.merge(broker_answer(verdict.forward))
    codes = {t.name: (int(t.error_code), t.error_message) for t in merged.topics}
    assert codes["acme.a"] == (0, None) and codes["acme.b"] == (0, None)
    assert codes["acme.huge"][0] == 44 and "at most 4 partitions per topic" in codes["acme.huge"][1]
    assert codes["acme.long"][0] == 44 and "infinite retention" in codes["acme.long"][1]
    assert codes["acme.c"][0] == 44 and "at most 3 topics" in codes["acme.c"][1]
    assert codes["globex.y"][0] == 44 and "namespace" in codes["globex.y"][1]


async def test_everything_refused_is_answered_locally(tmp_path: Path) -> None:
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({"acme.x": 8}))
    verdict = await resolve(admin.decide(19, create_request(creatable("acme.y", 1)),
                                         CreateTopicsResponse, PASS))  # fmt: skip
    assert verdict.forward is None
    (topic,) = verdict.local.topics
    assert int(topic.error_code) == 44 and "at most 8 partitions in all" in topic.error_message


async def test_no_topic_list_fails_closed_with_a_clear_message(tmp_path: Path) -> None:
    async def broken() -> Mapping[str, int]:
        raise OSError("connection refused")

    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, broken)
    verdict = await resolve(admin.decide(19, create_request(creatable("acme.y", 1)),
                                         CreateTopicsResponse, PASS))  # fmt: skip
    (topic,) = verdict.local.topics
    assert int(topic.error_code) == -1 and "topic list is unavailable" in topic.error_message


async def test_mutation_rate_answers_throttling_quota_exceeded(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, plans={"small": {**PLAN, "mutations": 1, "mutations_burst": 2}})
    admin = QuotaAdmin(engine, ADMIN, topics_source({}))
    first = await resolve(admin.decide(19, create_request(creatable("acme.a", 4)),
                                       CreateTopicsResponse, PASS))  # fmt: skip
    assert first.forward is True and not first.rewritten  # allowed; 4 partitions booked
    second = await resolve(admin.decide(19, create_request(creatable("acme.b", 1)),
                                        CreateTopicsResponse, PASS))  # fmt: skip
    (topic,) = second.local.topics
    assert int(topic.error_code) == 89 and "retry in" in topic.error_message


async def test_create_partitions_counts_the_current_topic(tmp_path: Path) -> None:
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({"acme.a": 2, "acme.b": 2}))
    request = CreatePartitionsRequest(
        topics=(
            CreatePartitionsTopic(name="acme.a", count=i32(4), assignments=None),
            CreatePartitionsTopic(name="acme.b", count=i32(5), assignments=None),
        ),
        timeout=TIMEOUT, validate_only=False,
    )  # fmt: skip
    verdict = await resolve(admin.decide(37, request, CreatePartitionsResponse, PASS))
    assert [t.name for t in verdict.forward.topics] == ["acme.a"]
    refused = verdict.merge(CreatePartitionsResponse(throttle_time=datetime.timedelta(0),
                                                     results=())).results  # fmt: skip
    assert [(r.name, int(r.error_code)) for r in refused] == [("acme.b", 44)]


def test_retention_changes_are_decided_at_once(tmp_path: Path) -> None:
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({}))

    def resource(name: str, value: str, op: int = 0) -> AlterConfigsResource:
        config = AlterableConfig(name="retention.ms", config_operation=i8(op), value=value)
        return AlterConfigsResource(resource_type=i8(2), resource_name=name, configs=(config,))

    request = IncrementalAlterConfigsRequest(
        resources=(resource("acme.a", "3600000"), resource("acme.b", "999999999999"),
                   resource("acme.c", "-1", op=1)),  # DELETE: back to the default, not checked
        validate_only=False,
    )  # fmt: skip
    verdict = admin.decide(44, request, IncrementalAlterConfigsResponse, PASS)
    assert verdict.defer is None
    assert [r.resource_name for r in verdict.forward.resources] == ["acme.a", "acme.c"]
    plain = AlterConfigsRequest(
        resources=(PlainResource(resource_type=i8(2), resource_name="acme.d",
                                 configs=(PlainConfig(name="retention.ms", value="-1"),)),),
        validate_only=False,
    )  # fmt: skip
    local = admin.decide(33, plain, AlterConfigsResponse, PASS).local
    ((response),) = local.responses
    assert int(response.error_code) == 44
    assert "retention.ms up to 86400000" in response.error_message


async def test_authorization_and_licence_refusals_are_merged(
    tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    authorizer = make_authorizer(["p, User:admin, TOPIC, PREFIXED, acme.ok, CREATE, *, allow"])
    enforcer = Enforcer(authorizer, ADMIN)
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({}))
    request = create_request(creatable("acme.ok1", 1), creatable("acme.ok2", 9),
                             creatable("acme.no", 1))  # fmt: skip
    authz = enforcer.decide(19, request, CreateTopicsResponse)
    verdict = await resolve(admin.decide(19, request, CreateTopicsResponse, authz))
    assert [t.name for t in verdict.forward.topics] == ["acme.ok1"]
    merged = verdict.merge(broker_answer(verdict.forward))
    assert {t.name: int(t.error_code) for t in merged.topics} == {
        "acme.ok1": 0, "acme.ok2": 44, "acme.no": 29,
    }  # fmt: skip


def test_without_a_tenant_or_a_plan_nothing_changes(tmp_path: Path) -> None:
    no_tenant = ClientIdentity("l", "10.0.0.1", 1, "User:ops")
    admin = QuotaAdmin(engine_for(tmp_path), no_tenant, topics_source({}))
    request = create_request(creatable("anything", 100))
    assert admin.decide(19, request, CreateTopicsResponse, PASS) is PASS
    no_plan = QuotaAdmin(
        QuotaEngine.from_config(QuotaConfig.model_validate({"store_file": tmp_path / "x.json"})),
        ADMIN, topics_source({}),
    )  # fmt: skip
    assert no_plan.decide(19, request, CreateTopicsResponse, PASS) is PASS


async def test_confirmed_creations_reach_the_topic_view(tmp_path: Path) -> None:
    noted: list[tuple[str, int]] = []
    admin = QuotaAdmin(engine_for(tmp_path), ADMIN, topics_source({}),
                       lambda topic, partitions: noted.append((topic, partitions)))  # fmt: skip
    request = create_request(creatable("acme.a", 2), creatable("acme.b", 3),
                             creatable("acme.c", 9))  # fmt: skip
    verdict = await resolve(admin.decide(19, request, CreateTopicsResponse, PASS))
    answer = broker_answer(verdict.forward)
    failed = dataclasses.replace(answer.topics[1], error_code=ErrorCode.topic_already_exists)
    verdict.merge(CreateTopicsResponse(throttle_time=answer.throttle_time,
                                       topics=(answer.topics[0], failed)))  # fmt: skip
    assert noted == [("acme.a", 2)]  # not the one the broker refused, nor the licence's


def test_a_plan_without_licence_limits_checks_nothing(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, plans={"small": {"produce_bytes": 1000}})
    admin = QuotaAdmin(engine, ADMIN, topics_source({}))
    request = create_request(creatable("elsewhere.x", 100))  # not even the namespace
    assert admin.decide(19, request, CreateTopicsResponse, PASS) is PASS
