"""Helpers shared by unit tests: building frames with kio, a public map."""

from __future__ import annotations

import pytest

from gateway.config import ListenerConfig
from gateway.topology import PublicMap, Topology


@pytest.fixture
def topology() -> Topology:
    return Topology()


@pytest.fixture
def mapping(topology: Topology) -> PublicMap:
    listener = ListenerConfig(
        name="public",
        bootstrap_port=19092,
        broker_port_base=19100,
        advertised_host="kafka.example.com",
    )
    return PublicMap(listener, topology)
