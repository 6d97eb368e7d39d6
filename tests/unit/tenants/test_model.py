from __future__ import annotations

import pytest

from gateway.authz.model import Operation, PatternType, ResourceType
from gateway.tenants.model import (
    Tenant,
    TenantError,
    check_name,
    namespace,
    namespace_rules,
    overlapping,
    role_filter,
)


@pytest.mark.parametrize("name", ["acme", "a", "acme-2", "x" * 48])
def test_good_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "Acme", "acme.eu", "acme_eu", "-acme", "acme-", "x" * 49])
def test_bad_names(name: str) -> None:
    with pytest.raises(TenantError):
        check_name(name)


def test_name_may_not_hold_the_configured_separator() -> None:
    with pytest.raises(TenantError, match="separator"):
        check_name("acme-eu", "{tenant}-")
    assert namespace("acme", "{tenant}--") == "acme--"


def test_overlapping_namespaces() -> None:
    assert overlapping("acme.", {"acme": "acme."}) == "acme"
    assert overlapping("acme-x.", {"acme": "acme."}) is None
    assert overlapping("ac.", {"acme": "acme."}) is None


def test_rules_are_prefixed_and_confined_to_the_namespace() -> None:
    rules = namespace_rules("acme", "acme.")
    assert {r.principal for r in rules} == {"Role:tenant-acme"}
    data = [r for r in rules if r.resource_type is not ResourceType.CLUSTER]
    assert {r.resource_type for r in data} == {
        ResourceType.TOPIC,
        ResourceType.GROUP,
        ResourceType.TRANSACTIONAL_ID,
    }
    assert all(r.pattern_type is PatternType.PREFIXED and r.name == "acme." for r in data)
    (cluster,) = [r for r in rules if r.resource_type is ResourceType.CLUSTER]
    assert cluster.operation is Operation.IDEMPOTENT_WRITE
    assert all(role_filter("acme").matches(r) for r in rules)
    assert not any(role_filter("other").matches(r) for r in rules)


def test_record_roundtrip_and_blocked_states() -> None:
    tenant = Tenant("acme", "bronze", "acme.", api_keys=("ak_1",))
    assert Tenant.from_record(tenant.to_record()) == tenant
    assert not tenant.blocked
    assert tenant.with_state("suspended").blocked
    assert tenant.with_state("deleted").blocked
    with pytest.raises(TenantError):
        Tenant.from_record({"name": "x", "state": "weird"})
