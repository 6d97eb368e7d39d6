"""The resource table covers every resource-bearing field of every advertised version.

A new Kafka version that adds a topic id, a session, a regex or an "all" form to an
advertised API fails here until RESOURCE_FIELDS says how it is authorized."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from gateway.enforcement import advertised
from gateway.enforcement.resources import RESOURCE_FIELDS, resource_paths
from gateway.protocol import apis

ADVERTISED = {
    key: spec for key in sorted(apis.gateway_apis()) if (spec := advertised(key)) is not None
}
CASES = [(k, v) for k, s in ADVERTISED.items() for v in range(s.min_version, s.max_version + 1)]


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{k}-v{v}" for k, v in CASES])
def test_every_resource_field_of_an_advertised_version_is_handled(key: int, version: int) -> None:
    found = set(resource_paths(apis.request_schema(key, version)))
    unhandled = found - set(RESOURCE_FIELDS.get(key, {}))
    assert not unhandled, (
        f"{apis.api_name(key)} v{version}: say how {sorted(unhandled)} is authorized"
    )


def test_no_entry_names_a_field_no_advertised_version_has() -> None:
    seen: dict[int, set[str]] = {}
    for key, version in CASES:
        seen.setdefault(key, set()).update(resource_paths(apis.request_schema(key, version)))
    stale = {key: set(paths) - seen.get(key, set()) for key, paths in RESOURCE_FIELDS.items()}
    assert not {k: p for k, p in stale.items() if p}


def test_the_walk_finds_ids_and_all_forms() -> None:
    paths = set(resource_paths(MetadataRequest))
    assert {"topics?", "topics[].name", "topics[].topic_id"} <= paths


@dataclasses.dataclass(frozen=True)
class _Topic:
    name: str
    topic_id: str


@dataclasses.dataclass(frozen=True)
class _FutureListOffsets:
    topics: tuple[_Topic, ...]


def test_a_new_topic_id_field_would_fail_the_table() -> None:
    found = set(resource_paths(_FutureListOffsets))
    assert found - set(RESOURCE_FIELDS[2]) == {"topics[].topic_id"}
