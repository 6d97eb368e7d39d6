"""DescribeClientQuotas / AlterClientQuotas as kio messages, every version, encoded."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from gateway.protocol.codec import encode_body
from gateway.quotas import ClientQuotaError, FilterComponent, describe_client_quotas
from gateway.quotas.kafka_entities import alter_client_quotas
from gateway.quotas.kafka_messages import (
    alter_entries,
    alter_response,
    describe_filter,
    describe_response,
)
from gateway.quotas.store import FileQuotaStore

from .conftest import settings


def schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def roundtrip(entity: Any) -> Any:
    decoded, _ = entity_reader(type(entity))(encode_body(entity), 0)
    return decoded


@pytest.mark.parametrize("version", [0, 1])
def test_describe_through_kio(version: int) -> None:
    req = schema("describe_client_quotas", version, "request")
    request = req.DescribeClientQuotasRequest(
        components=(req.ComponentData(entity_type="user", match_type=0, match="alice"),),
        strict=False,
    )
    components, strict = describe_filter(roundtrip(request))
    assert components == [FilterComponent("user", 0, "alice")] and strict is False
    snapshot = settings({"principal:User:alice": {"produce_bytes": 1024}})
    rc = schema("describe_client_quotas", version, "response").DescribeClientQuotasResponse
    response = roundtrip(
        describe_response(rc, describe_client_quotas(snapshot, components, strict))
    )
    assert int(response.error_code) == 0
    [entry] = response.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", "alice")]
    assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]
    failed = roundtrip(describe_response(rc, ClientQuotaError(42, "bad filter"), throttle_ms=5))
    assert (int(failed.error_code), failed.error_message) == (42, "bad filter")


@pytest.mark.parametrize("version", [0, 1])
def test_alter_through_kio(version: int, tmp_path: Path) -> None:
    req = schema("alter_client_quotas", version, "request")
    request = req.AlterClientQuotasRequest(
        entries=(
            req.EntryData(
                entity=(req.EntityData(entity_type="user", entity_name="alice"),),
                ops=(req.OpData(key="consumer_byte_rate", value=2048.0, remove=False),),
            ),
            req.EntryData(
                entity=(req.EntityData(entity_type="user", entity_name=None),),
                ops=(req.OpData(key="consumer_byte_rate", value=1.0, remove=False),),
            ),
        ),
        validate_only=False,
    )
    entries, validate_only = alter_entries(roundtrip(request))
    store = FileQuotaStore(tmp_path / "q.json")
    results = alter_client_quotas(store, entries, "User:admin", validate_only)
    rc = schema("alter_client_quotas", version, "response").AlterClientQuotasResponse
    response = roundtrip(alter_response(rc, results))
    assert [int(e.error_code) for e in response.entries] == [0, 42]
    assert response.entries[1].entity[0].entity_name is None
    assert "plans" in (response.entries[1].error_message or "")
