"""The file store: atomic entries, validation, hooks; what the engine reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.quotas import FileQuotaStore, PlanConfig, StoreError, Target
from gateway.quotas.model import InvalidQuotaError

ACME = Target.parse("tenant:acme")


def test_values_are_merged_and_removed(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "sub" / "q.json")
    store.set_values(ACME, {"produce_bytes": 10, "fetch_bytes": 20}, "me")
    assert store.set_values(ACME, {"fetch_bytes": None, "requests": 5}, "me") == {
        "produce_bytes": 10,
        "requests": 5,
    }
    assert store.set_values(ACME, {"produce_bytes": None, "requests": None}, "me") is None
    assert store.load().quotas == {}


def test_refused_values_change_nothing(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "q.json")
    store.set_values(ACME, {"produce_bytes": 10}, "me")
    before = store.path.read_text()
    with pytest.raises(InvalidQuotaError):
        store.set_values(ACME, {"produce_bytes": 1, "bogus": 2}, "me")
    with pytest.raises(InvalidQuotaError):
        store.set_values(ACME, {"bogus": None}, "me")
    assert store.path.read_text() == before


def test_plans_and_assignments(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "q.json")
    changes: list[str] = []
    store.add_hook(lambda actor, action, target, before, after: changes.append(action))
    store.set_plan("gold", PlanConfig(produce_bytes=5, max_topics=3), "me")
    store.assign("acme", "gold", "me")
    store.assign("acme", "gold", "me")  # no change: no hook
    settings = store.load()
    assert settings.plans["gold"].max_topics == 3
    assert settings.assignments == {"acme": "gold"}
    store.assign("acme", None, "me")
    store.set_plan("gold", None, "me")
    assert changes == ["plan_set", "plan_assign", "plan_unassign", "plan_remove"]
    with pytest.raises(InvalidQuotaError):
        store.set_plan("no spaces", PlanConfig(), "me")


def test_the_version_follows_the_content(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "q.json")
    first = store.version()
    store.set_values(ACME, {"produce_bytes": 10}, "me")
    second = store.version()
    assert first != second == store.load().version


def test_a_hand_edited_bad_entry_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    doc = {
        "quotas": {"tenant:a": {"produce_bytes": 1}, "tenant:b": {"produce_bytes": -1}},
        "plans": {"p": {"max_topics": "many"}},
        "tenants": {"a": "p"},
    }
    path.write_text(json.dumps(doc))
    settings = FileQuotaStore(path).load()
    assert list(settings.quotas) == [Target.parse("tenant:a")]
    assert settings.plans == {} and settings.assignments == {"a": "p"}


def test_an_unreadable_file_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text("{nope")
    with pytest.raises(StoreError, match="not valid JSON"):
        FileQuotaStore(path).load()
