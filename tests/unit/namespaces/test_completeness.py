"""The namespace table against kio's schemas: every name-bearing field of every version
offered to a namespaced tenant is mapped or declared not to be a name, and every API
not in the table is not offered. A new Kafka version with a name field fails here until
it is mapped (or capped)."""

from __future__ import annotations

import pytest

from gateway.namespaces.table import NAMED_APIS, NAMELESS, offered_max
from gateway.protocol import apis

from .samples import name_paths

CASES = [
    (key, version)
    for key, spec in sorted(apis.gateway_apis().items())
    if (top := offered_max(key, spec.max_version)) is not None
    for version in range(spec.min_version, top + 1)
]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_every_name_field_is_mapped(key: int, version: int) -> None:
    if key in NAMELESS:
        assert key not in NAMED_APIS
        for cls in (apis.request_schema(key, version), apis.response_schema(key, version)):
            names = set(name_paths(cls)) - {"mechanism", "mechanisms[]"}
            assert not {n for n in names if "topic" in n or "group" in n or "transactional" in n}
        return
    entry = NAMED_APIS[key]
    known = set(entry.not_names) | set(entry.special)
    request = set(name_paths(apis.request_schema(key, version)))
    response = set(name_paths(apis.response_schema(key, version)))
    unmapped_request = request - set(entry.request) - known
    unmapped_response = response - set(entry.response) - known
    assert not unmapped_request, f"{apis.api_name(key)} v{version} request"
    assert not unmapped_response, f"{apis.api_name(key)} v{version} response"


@pytest.mark.parametrize("key", sorted(NAMED_APIS))
def test_table_names_only_real_fields(key: int) -> None:
    """A path of the table that no version has is a typo."""
    spec = apis.gateway_apis()[key]
    top = offered_max(key, spec.max_version)
    assert top is not None
    seen: set[str] = set()
    for version in range(spec.min_version, top + 1):
        seen |= set(name_paths(apis.request_schema(key, version)))
        seen |= set(name_paths(apis.response_schema(key, version)))
    entry = NAMED_APIS[key]
    declared = {*entry.request, *entry.response, *entry.not_names, *entry.special}
    assert declared <= seen, declared - seen


def test_topic_id_only_versions_are_not_offered() -> None:
    """Produce/Fetch v13+ and OffsetCommit/OffsetFetch v10+ name topics by id only."""
    for key, top in ((0, 12), (1, 12), (8, 9), (9, 9)):
        assert offered_max(key, apis.gateway_apis()[key].max_version) == top


def test_unmapped_apis_are_not_offered() -> None:
    hidden = {k for k in apis.gateway_apis() if offered_max(k, 99) is None}
    # log dirs, reassignments, share groups… are not offered (the ACL APIs are mapped,
    # offered only where the gateway answers them: test_acls.py)
    assert {35, 43, 45, 46, 76, 77, 78, 79}.issubset(hidden)
    assert not hidden & set(NAMED_APIS)
