"""One tenant's namespace: no spelling reaches outside it, nothing outside comes back."""

from __future__ import annotations

import re

import pytest

from gateway import saferegex
from gateway.namespaces.names import NameRefused, Namespace

NS = Namespace("acme", "acme.")


@pytest.mark.parametrize(
    "typed",
    ["orders", "other.orders", "acme.orders", "../orders", "", "ACME.x", "ordérs", "x" * 300],
)
def test_every_spelling_stays_inside(typed: str) -> None:
    cluster = NS.to_cluster(typed)
    assert cluster.startswith("acme.") and NS.to_tenant(cluster) == typed


@pytest.mark.parametrize(
    "name",
    ["other.orders", "ACME.orders", "acme", "acmex.orders", "acme_orders", "\uff41cme.orders"],
)
def test_foreign_names_do_not_come_back(name: str) -> None:
    assert NS.to_tenant(name) is None


def test_messages_show_tenant_names() -> None:
    message = "Topic 'acme.orders' already exists; see acme.orders-2 and notacme.x"
    assert NS.strip_message(message) == "Topic 'orders' already exists; see orders-2 and notacme.x"
    assert NS.strip_message(None) is None


@pytest.mark.parametrize("pattern", [".*", "ord.*", "a|b", "(x)+"])
def test_regexes_match_only_inside(pattern: str) -> None:
    cluster = NS.regex_to_cluster(pattern)
    assert NS.regex_to_tenant(cluster) == saferegex.canonical(pattern)
    compiled = re.compile(cluster)
    assert not compiled.fullmatch("other.orders") and not compiled.fullmatch("b")
    if pattern == ".*":
        assert compiled.fullmatch("acme.anything")


@pytest.mark.parametrize("pattern", ["a)|(.*", r"\Qacme\E", "(?=x).*", "[", r"\p{L}"])
def test_escaping_regexes_are_refused(pattern: str) -> None:
    with pytest.raises(NameRefused):
        NS.regex_to_cluster(pattern)
