"""One stack for the whole hostile-tenant suite: a gateway with two tenants (SASL PLAIN
API keys, authorization and plans on), the victim's state, the attacker's own.

The fixture is parametrized by enforcement mode (``stack.MODES``): ``gateway`` (the
gateway's own checks) and ``brokers`` (the gateway's checks off: the brokers refuse
through the per-tenant upstream principals). The victim's state is compared before and
after the whole suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from gateway.devstack.kafka_cluster import KafkaCluster

from ...conftest import GatewayFactory
from .snapshot import Snapshot, differences, snapshot
from .stack import MODES, Stack, populate, start_stack


class Hostile:
    def __init__(self, stack: Stack, baseline: Snapshot) -> None:
        self.stack = stack
        self.baseline = baseline
        self.advertised: dict[int, tuple[int, int]] = {}


@pytest.fixture(scope="package", params=MODES)  # parametrization point: enforcement mode
def hostile(
    request: pytest.FixtureRequest,
    gateway_factory: GatewayFactory,
    kafka_cluster: KafkaCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Hostile]:
    stack = start_stack(request.param, gateway_factory, kafka_cluster,
                        tmp_path_factory.mktemp(f"hostile-{request.param}"))  # fmt: skip
    stack.ctx = populate(stack)
    baseline = asyncio.run(snapshot(stack, stack.ctx))
    hostile = Hostile(stack, baseline)

    async def advertised() -> dict[int, tuple[int, int]]:
        conn = await stack.connect(stack.attacker)
        try:
            return await conn.api_versions()
        finally:
            conn.close()

    hostile.advertised = asyncio.run(advertised())
    try:
        yield hostile
        after = asyncio.run(snapshot(stack, stack.ctx))
        changed = differences(hostile.baseline, after)  # moved on only by the victim's control
        assert not changed, "the victim's state changed during the suite:\n" + "\n".join(changed)
    finally:
        if stack.close is not None:
            stack.close()
