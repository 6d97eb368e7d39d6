"""Shared helpers for quota unit tests: settings snapshots, an engine on a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway.quotas import QuotaConfig, QuotaEngine, QuotaSettings, Subject, Target
from gateway.quotas.store import FileQuotaStore

ALICE = Subject("User:alice", "key-1", "acme", "10.0.0.1")


def settings(quotas: Mapping[str, Mapping[str, float]] = {}, **rest: Any) -> QuotaSettings:
    return QuotaSettings({Target.parse(t): dict(v) for t, v in quotas.items()}, **rest)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


EngineFactory = Callable[..., QuotaEngine]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_engine(tmp_path: Path, clock: Clock) -> EngineFactory:
    """``make_engine(quotas={...}, **config)``: a single-instance engine on the fake clock."""

    def make(quotas: Mapping[str, Mapping[str, float]] = {}, **config: Any) -> QuotaEngine:
        store = FileQuotaStore(tmp_path / "quotas.json")
        for target, values in quotas.items():
            store.set_values(Target.parse(target), values, "test")
        cfg = QuotaConfig.model_validate({"store_file": store.path, **config})
        return QuotaEngine.from_config(cfg, clock=clock)

    return make
