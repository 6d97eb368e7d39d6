"""Helpers shared by unit tests: building frames with kio, a public map, a real
casbin authorizer over the shipped model."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.addresses.topology import PublicMap, Topology
from gateway.authz.engine import Authorizer
from gateway.config import AuthorizationConfig, ListenerConfig

POLICIES = Path(__file__).parents[2] / "policies"
MakeAuthorizer = Callable[..., Authorizer]


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


@pytest.fixture
def make_authorizer(tmp_path: Path) -> MakeAuthorizer:
    """A real casbin Authorizer over the shipped model and the given policy lines."""

    def make(lines: list[str], super_users: list[str] | None = None) -> Authorizer:
        directory = tmp_path / f"policy-{len(list(tmp_path.iterdir()))}"
        directory.mkdir()
        shutil.copy(POLICIES / "model.conf", directory / "model.conf")
        (directory / "policy.csv").write_text("\n".join(lines) + "\n")
        config = AuthorizationConfig(policy_dir=directory, super_users=super_users or [])
        return Authorizer.from_config(config)

    return make
