"""Filter factories for the loader tests, imported by module path like an operator's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.filters.api import BaseFilter, RequestCall, ResponseCall


class Recorder(BaseFilter):
    """Keeps the config it was built with."""

    name = "recorder"
    api_keys = frozenset({0, 1})


def make_recorder(config: Mapping[str, Any]) -> Recorder:
    """A factory that is a function, not a class."""
    return Recorder(config)


class Strict(BaseFilter):
    """Refuses a config without ``limit``."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        if "limit" not in (config or {}):
            raise ValueError("limit is required")


class NotAFilter:
    """Has hooks but no ``api_keys``."""

    name = "not-a-filter"

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def on_request(self, call: RequestCall) -> None:
        return None

    def on_response(self, call: ResponseCall) -> None:
        return None


class ListKeys(BaseFilter):
    api_keys = [0, 1]  # type: ignore[assignment]  # a list is not a set


class NamedKeys(BaseFilter):
    api_keys = frozenset({"Produce"})  # type: ignore[arg-type]  # names, not numbers


class Frozen(BaseFilter):
    """A filter whose name cannot be set (a property without a setter)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        return "frozen"
