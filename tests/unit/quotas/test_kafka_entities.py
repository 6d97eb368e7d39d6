"""Kafka's DescribeClientQuotas / AlterClientQuotas mapped onto the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.quotas import (
    ClientQuotaError,
    FilterComponent,
    QuotaOp,
    Target,
    alter_client_quotas,
    describe_client_quotas,
)
from gateway.quotas.kafka_entities import INVALID_REQUEST, entity_target, target_entity
from gateway.quotas.store import FileQuotaStore

from .conftest import settings

ALICE = (("user", "alice"),)
SNAPSHOT = settings(
    {
        "principal:User:alice": {"produce_bytes": 1024, "produce_bytes_burst": 4096},
        "principal:User:bob": {"fetch_bytes": 2048},
        "principal:Group:ops": {"requests": 5},  # Kafka cannot name it: never described
        "api-key:k1": {"requests": 10},
        "ip:10.0.0.1": {"connection_rate": 3},
        "tenant:acme": {"produce_bytes": 1e6},
    }
)


@pytest.fixture
def store(tmp_path: Path) -> FileQuotaStore:
    return FileQuotaStore(tmp_path / "q.json")


def test_entities_map_one_to_one_onto_targets() -> None:
    cases = {
        ALICE: "principal:User:alice",
        (("client-id", "k1"),): "api-key:k1",
        (("ip", "10.0.0.1"),): "ip:10.0.0.1",
        (("tenant", "acme"),): "tenant:acme",
    }
    for entity, target in cases.items():
        assert str(entity_target(entity)) == target
        assert target_entity(Target.parse(target)) == entity


@pytest.mark.parametrize(
    ("entity", "words"),
    [
        ((("user", None),), "plans in the gateway"),
        ((("user", "a"), ("client-id", "b")), "not for combinations"),
        ((("brokers", "1"),), "unknown quota entity type"),
        ((), "empty"),
    ],
)
def test_entities_the_gateway_does_not_keep(entity: tuple, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ClientQuotaError, match=words) as caught:
        entity_target(entity)
    assert caught.value.code == INVALID_REQUEST


def test_describe_everything_uses_kafka_key_names() -> None:
    entries = {e.entity: e.values for e in describe_client_quotas(SNAPSHOT, [], strict=False)}
    assert entries[ALICE] == {"producer_byte_rate": 1024, "produce_bytes_burst": 4096}
    assert entries[(("client-id", "k1"),)] == {"request_percentage": 10}
    assert entries[(("ip", "10.0.0.1"),)] == {"connection_creation_rate": 3}
    assert len(entries) == 5  # Group:ops is not a Kafka user


def test_describe_one_user_exactly() -> None:
    entries = describe_client_quotas(SNAPSHOT, [FilterComponent("user", 0, "alice")], False)
    assert [e.entity for e in entries] == [ALICE]


def test_describe_any_named_user() -> None:
    entries = describe_client_quotas(SNAPSHOT, [FilterComponent("user", 2)], strict=True)
    assert [e.entity for e in entries] == [ALICE, (("user", "bob"),)]


def test_describe_defaults_finds_none_and_strict_without_components_finds_none() -> None:
    assert describe_client_quotas(SNAPSHOT, [FilterComponent("user", 1)], False) == []
    assert describe_client_quotas(SNAPSHOT, [], strict=True) == []
    two = [FilterComponent("user", 2), FilterComponent("client-id", 2)]
    assert describe_client_quotas(SNAPSHOT, two, False) == []


@pytest.mark.parametrize(
    "components",
    [
        [FilterComponent("topic", 2)],
        [FilterComponent("user", 0)],
        [FilterComponent("user", 2), FilterComponent("user", 2)],
        [FilterComponent("user", 7)],
    ],
)
def test_malformed_describe_filters(components: list[FilterComponent]) -> None:
    with pytest.raises(ClientQuotaError):
        describe_client_quotas(SNAPSHOT, components, False)


def test_alter_sets_and_removes_and_tells_the_audit_hook(store: FileQuotaStore) -> None:
    audit: list[tuple[object, ...]] = []
    store.add_hook(lambda *change: audit.append(change))
    ops = [QuotaOp("producer_byte_rate", 1048576), QuotaOp("consumer_byte_rate", 2e6)]
    assert alter_client_quotas(store, [(ALICE, ops)], "User:admin") == [(ALICE, 0, None)]
    target = Target.parse("principal:User:alice")
    assert store.load().quotas[target] == {"produce_bytes": 1048576, "fetch_bytes": 2e6}
    remove = [QuotaOp("consumer_byte_rate", 0, remove=True)]
    alter_client_quotas(store, [(ALICE, remove)], "User:admin")
    assert store.load().quotas[target] == {"produce_bytes": 1048576}
    actor, action, where, before, after = audit[-1]
    assert (actor, action, where) == ("User:admin", "quota_set", "quotas/principal:User:alice")
    assert before == {"produce_bytes": 1048576, "fetch_bytes": 2e6}
    assert after == {"produce_bytes": 1048576}


def test_alter_answers_each_entry_on_its_own(store: FileQuotaStore) -> None:
    entries = [
        ((("ip", "10.0.0.9"),), [QuotaOp("producer_byte_rate", 5)]),
        (ALICE, [QuotaOp("producer_byte_rate", -5)]),
        ((("user", None),), [QuotaOp("producer_byte_rate", 5)]),
        ((("client-id", "k9"),), [QuotaOp("nonsense", 5)]),
        ((("client-id", "k9"),), [QuotaOp("requests", 1), QuotaOp("request_percentage", 2)]),
        ((("ip", "10.0.0.9"),), [QuotaOp("connection_creation_rate", 5)]),
    ]
    results = alter_client_quotas(store, entries, "User:admin")
    assert [code for _, code, _ in results] == [42, 42, 42, 42, 42, 0]
    assert (results[0][2] or "").startswith("producer_byte_rate: not settable on ip")
    assert results[1][2] == "producer_byte_rate: must be > 0"
    assert "appears twice" in (results[4][2] or "")
    assert list(store.load().quotas) == [Target.parse("ip:10.0.0.9")]


def test_validate_only_changes_nothing(store: FileQuotaStore) -> None:
    ops = [QuotaOp("producer_byte_rate", 100)]
    assert alter_client_quotas(store, [(ALICE, ops)], "a", validate_only=True)[0][1] == 0
    assert not store.path.exists()
