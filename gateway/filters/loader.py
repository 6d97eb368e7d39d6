"""Building the configured filters at start-up: import, call the factory, check the result.

A factory is named by module path (``package.module:Factory``) or by an entry point
in the ``kgw.filters`` group; it is called once with the filter's ``config`` mapping
and must return an object that has ``api_keys`` and the two hooks (``api.Filter``).
Anything wrong fails start-up with ``FilterError`` naming ``filters[i]`` and why.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from .api import Filter, FilterError
from .chain import FilterChain
from .settings import FilterConfig

ENTRY_POINT_GROUP = "kgw.filters"


def build_chain(configs: Sequence[FilterConfig], first: Sequence[Filter] = ()) -> FilterChain:
    """The operators' filters, after the gateway's own ``first`` ones (namespaces,
    record encryption), which are outermost: first on requests, last on responses."""
    built = [build_filter(index, config) for index, config in enumerate(configs)]
    return FilterChain([*first, *built])


def build_filter(index: int, config: FilterConfig) -> Filter:
    where = f"filters[{index}]"
    factory = _factory(where, config)
    try:
        made = factory(dict(config.config))
    except Exception as exc:  # the filter's own validation of its settings
        raise FilterError(f"{where}: {_source(config)} refused its config: {exc}") from None
    checked = _check(where, config, made)
    if config.name:
        try:
            checked.name = config.name
        except AttributeError:
            raise FilterError(f"{where}: cannot set the name of {_source(config)}") from None
    return checked


def _source(config: FilterConfig) -> str:
    return config.module or f"entry point {config.entry_point!r}"


def _factory(where: str, config: FilterConfig) -> Any:
    if config.module is not None:
        module_name, _, attribute = config.module.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise FilterError(f"{where}: cannot import {module_name}: {exc}") from None
        factory = getattr(module, attribute, None)
        if factory is None:
            raise FilterError(f"{where}: {module_name} has no {attribute}")
        return factory
    name = config.entry_point or ""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        raise FilterError(f"{where}: no {ENTRY_POINT_GROUP} entry point {config.entry_point!r}")
    try:
        return next(iter(found)).load()
    except Exception as exc:
        raise FilterError(
            f"{where}: cannot load entry point {config.entry_point!r}: {exc}"
        ) from None


def _check(where: str, config: FilterConfig, made: Any) -> Filter:
    if not isinstance(made, Filter):
        raise FilterError(
            f"{where}: {_source(config)} returned {type(made).__name__}, which lacks"
            " name, api_keys, on_request or on_response"
        )
    keys = made.api_keys
    if keys is not None and (
        not isinstance(keys, frozenset | set) or not all(isinstance(k, int) for k in keys)
    ):
        raise FilterError(f"{where}: api_keys must be a set of API key numbers or None")
    return made
