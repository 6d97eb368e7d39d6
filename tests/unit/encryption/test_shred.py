"""``kgw tenant delete --shred``: which KEKs hold a tenant's records, and which of them
may be destroyed without shredding other tenants' records too."""

from __future__ import annotations

from typing import Any

from gateway.cli.keys import tenant_keks
from gateway.encryption.settings import PolicyConfig


def policies(*items: dict[str, Any]) -> list[PolicyConfig]:
    return [PolicyConfig.model_validate({"prefixes": ["p."], **item}) for item in items]


def test_the_tenant_named_kek_by_default() -> None:
    assert tenant_keks(policies({"tenant": "*"}), "acme") == (["acme"], [])


def test_a_kek_the_tenants_own_policy_names_is_shredded_too() -> None:
    found = tenant_keks(policies({"tenant": "acme", "kek": "acme-pay"}, {"tenant": "*"}), "acme")
    assert found == (["acme", "acme-pay"], [])


def test_a_shared_kek_is_named_not_destroyed() -> None:
    everyone = policies({"tenant": "*", "kek": "common"}, {"tenant": "*"})
    assert tenant_keks(everyone, "acme") == (["acme"], ["common"])
    both = policies({"tenant": "acme", "kek": "k"}, {"tenant": "beta", "kek": "k"})
    assert tenant_keks(both, "acme") == (["acme"], ["k"])
    # another tenant's KEK is neither destroyed nor reported
    assert tenant_keks(policies({"tenant": "beta", "kek": "b"}), "acme") == (["acme"], [])
    # a policy naming this tenant's own KEK for someone else: it is shared
    assert tenant_keks(policies({"tenant": "beta", "kek": "acme"}), "acme") == ([], ["acme"])


def test_a_kek_named_after_another_tenant_is_that_tenants_too() -> None:
    """Under a policy without ``kek``, tenant bob's records are under KEK "bob": acme's
    policy naming "bob" does not make it acme's to destroy."""
    mixed = policies({"tenant": "*"}, {"tenant": "acme", "kek": "bob"})
    assert tenant_keks(mixed, "acme", {"bob", "carol"}) == (["acme"], ["bob"])
    assert tenant_keks(mixed, "acme", {"carol"}) == (["acme", "bob"], [])  # no tenant bob
    only_bob = policies({"tenant": "bob"}, {"tenant": "acme", "kek": "bob"})
    assert tenant_keks(only_bob, "acme") == (["acme"], ["bob"])
    # no implicit use of "bob" (no policy without kek covers bob): acme's alone
    explicit = policies({"tenant": "acme", "kek": "bob"})
    assert tenant_keks(explicit, "acme") == (["acme", "bob"], [])


def test_the_default_kek_is_also_that_of_connections_without_a_tenant() -> None:
    everyone = policies({"tenant": "*"})
    assert tenant_keks(everyone, "default") == ([], ["default"])
    assert tenant_keks(policies({"tenant": "*"}, {"tenant": "acme", "kek": "default"}), "acme") == (
        ["acme"],
        ["default"],
    )
