"""Rewriting broker addresses in responses to the listener's public endpoints.

One function per address-bearing API. Each learns the private address it sees
(so new brokers get a listener) and replaces it with the public one. A function
returns the very same object when nothing needed rewriting, so the caller can
forward the broker's bytes untouched. tests/unit/addresses/test_rewrite.py checks
against kio that no other advertised response carries a broker address.

A Fetch response is mostly record batches, and kio's decoding copies every batch.
Its only addresses are the leader hints of Fetch v16+ (``node_endpoints``), a tagged
field at the top of the message that a broker sends only with a leadership error; so
``hints_by_walk`` names the versions whose responses the session first walks by their
lengths (``accesslog.counting.scan``) and decodes only when that tagged field is there
(decision 0051).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.static.primitive import i32
from kio.static.protocol import Entity

from ..protocol import apis
from .topology import AddressMap

Rewriter = Callable[[Any, AddressMap], Any]


def _endpoint(entry: Any, id_field: str, mapping: AddressMap) -> Any:
    node_id = int(getattr(entry, id_field))
    if node_id < 0:
        return entry
    mapping.learn(node_id, entry.host, int(entry.port))
    host, port = mapping.public(node_id)
    return dataclasses.replace(entry, host=host, port=i32(port))


def _endpoints(entries: tuple[Any, ...], id_field: str, mapping: AddressMap) -> tuple[Any, ...]:
    return tuple(_endpoint(entry, id_field, mapping) for entry in entries)


def _metadata(response: Any, mapping: AddressMap) -> Any:
    return dataclasses.replace(response, brokers=_endpoints(response.brokers, "node_id", mapping))


def _describe_cluster(response: Any, mapping: AddressMap) -> Any:
    brokers = _endpoints(response.brokers, "broker_id", mapping)
    return dataclasses.replace(response, brokers=brokers)


def _find_coordinator(response: Any, mapping: AddressMap) -> Any:
    if hasattr(response, "coordinators"):
        coordinators = _endpoints(response.coordinators, "node_id", mapping)
        return dataclasses.replace(response, coordinators=coordinators)
    return _endpoint(response, "node_id", mapping)


def _node_endpoints(response: Any, mapping: AddressMap) -> Any:
    if not response.node_endpoints:
        return response
    endpoints = _endpoints(response.node_endpoints, "node_id", mapping)
    return dataclasses.replace(response, node_endpoints=endpoints)


REWRITERS: dict[int, Rewriter] = {
    apis.METADATA: _metadata,
    apis.DESCRIBE_CLUSTER: _describe_cluster,
    apis.FIND_COORDINATOR: _find_coordinator,
    apis.PRODUCE: _node_endpoints,
    apis.FETCH: _node_endpoints,
    apis.SHARE_FETCH: _node_endpoints,
    apis.SHARE_ACKNOWLEDGE: _node_endpoints,
}


@cache
def needs_rewrite(api_key: int, api_version: int) -> bool:
    """Whether responses of this API version can carry broker addresses."""
    if api_key not in REWRITERS:
        return False
    if api_key in (apis.METADATA, apis.DESCRIBE_CLUSTER, apis.FIND_COORDINATOR):
        return True
    schema = apis.response_schema(api_key, api_version)
    return any(f.name == "node_endpoints" for f in dataclasses.fields(schema))


# Responses made mostly of record batches, where a walk is cheaper than a decode.
_RECORD_CARRIERS = frozenset({apis.FETCH})


@cache
def hints_by_walk(api_key: int, api_version: int) -> bool:
    """Whether this version's responses carry addresses only in a top-level tagged field
    and are worth walking (not decoding) to learn whether any tagged field is present."""
    if api_key not in _RECORD_CARRIERS or not needs_rewrite(api_key, api_version):
        return False
    schema = apis.response_schema(api_key, api_version)
    hints = next(f for f in dataclasses.fields(schema) if f.name == "node_endpoints")
    return "tag" in hints.metadata


def rewrite(api_key: int, response: Entity, mapping: AddressMap) -> Entity:
    """The response with every broker address replaced by its public endpoint."""
    result: Entity = REWRITERS[api_key](response, mapping)
    return result
