"""The per-API registry covers every API the gateway knows, and docs/apis.md is it."""

from __future__ import annotations

from pathlib import Path

from gateway.addresses.rewrite import REWRITERS
from gateway.enforcement.acl_admin import ACL_APIS
from gateway.enforcement.resources import RESOURCE_FIELDS
from gateway.enforcement.units import UNITS
from gateway.filters.registry import markdown, registry
from gateway.protocol import apis
from gateway.quotas.kafka_messages import CLIENT_QUOTA_APIS
from gateway.quotas.licence_apis import LICENCE_APIS

DOC = Path(__file__).resolve().parents[3] / "docs" / "apis.md"


def test_every_api_the_gateway_knows_has_one_entry() -> None:
    assert set(registry()) == set(apis.gateway_apis())


def test_every_per_api_table_names_only_known_apis() -> None:
    known = set(registry())
    for table in (UNITS, ACL_APIS, REWRITERS, RESOURCE_FIELDS, CLIENT_QUOTA_APIS, LICENCE_APIS):
        assert set(table) <= known


def test_offered_apis_say_how_they_are_authorized() -> None:
    for entry in registry().values():
        if entry.versions is not None:
            assert not entry.authorization.startswith("not offered"), entry
        else:
            assert entry.authorization.startswith("not offered"), entry


def test_entries_agree_with_the_feature_tables() -> None:
    entries = registry()
    assert entries[apis.METADATA].rewrites_addresses
    assert not entries[2].rewrites_addresses  # ListOffsets
    assert "produce bytes" in entries[apis.PRODUCE].charges
    assert entries[apis.API_VERSIONS].charges == ()
    for key in ACL_APIS:
        assert entries[key].local is not None
    assert entries[apis.FETCH].resources == RESOURCE_FIELDS[apis.FETCH]


def test_docs_apis_md_is_the_registry() -> None:
    assert DOC.read_text() == markdown(), (
        "docs/apis.md is stale: python -m gateway.filters.registry > docs/apis.md"
    )
