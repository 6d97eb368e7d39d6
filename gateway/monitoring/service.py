"""Wiring: the monitoring state, its collector on ``/metrics`` and the background loops.

``start`` is called once by ``runtime.supervisor.start_background`` when the
``monitoring`` section is present and enabled. Nothing here touches the data path:
the loops are tasks of their own, through ``Supervisor.spawn``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..upstream.client import BrokerClient
from .canary import CanaryBook
from .canary_loop import CanaryClient
from .collector import MonitoringCollector
from .loops import HealthRound, LagRound, every
from .settings import CanaryConfig, MonitoringConfig
from .state import MonitoringState
from .tenancy import TenantLabels

if TYPE_CHECKING:
    from ..config import GatewayConfig, ListenerConfig
    from ..runtime.gateway import Gateway

log = logging.getLogger("kgw.monitoring")
Spawn = Callable[[str, Coroutine[Any, Any, Any]], Any]


def canary_listener(config: GatewayConfig, canary: CanaryConfig) -> ListenerConfig:
    """The listener the canary goes through (``ValueError`` if it names none)."""
    for listener in config.listeners:
        if canary.listener is None or listener.name == canary.listener:
            return listener
    raise ValueError(f"monitoring.canary.listener {canary.listener!r} is not a listener")


def public_client(config: GatewayConfig, canary: CanaryConfig) -> BrokerClient:
    """A client of the listener's public bootstrap address, as the canary tenant."""
    from ..tls.upstream import upstream_context
    from ..upstream.identity import UpstreamIdentity

    listener = canary_listener(config, canary)
    address = (listener.advertised_host, listener.public_bootstrap_port)
    tls = upstream_context(canary.tls) if canary.tls is not None else None
    identity = UpstreamIdentity.load(canary.sasl) if canary.sasl is not None else None
    return BrokerClient([address], tls=tls, identity=identity, timeout_s=canary.timeout_s)


async def canary_loop(
    client: CanaryClient, interval_s: float, stop: asyncio.Event, state: MonitoringState
) -> None:
    try:
        while not stop.is_set():
            try:
                if await client.round():
                    state.succeeded("canary")
                else:
                    state.failed("canary")
            except Exception:  # a bug must not end the canary for good
                state.failed("canary")
                log.exception("canary round failed", extra={"event": "monitoring_bug"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
    finally:
        client.close()


def start(
    config: MonitoringConfig,
    gateway_config: GatewayConfig,
    admin: BrokerClient,
    register: Callable[[MonitoringCollector], None] | None,
    spawn: Spawn,
    stop: asyncio.Event,
) -> MonitoringState:
    """Register the collector (when there is a registry) and spawn the enabled loops."""
    tenants = TenantLabels(config.prefix_format, config.max_tenants)
    state = MonitoringState(partition_metrics=config.lag.partition_metrics)
    if register is not None:
        register(MonitoringCollector(state))
    if config.health.enabled:
        health = HealthRound(admin, config.health, state, tenants)
        spawn("monitoring-health", every("health", config.health.interval_s, stop, state, health))
    if config.lag.enabled:
        lag = LagRound(admin, config.lag, state, tenants)
        spawn("monitoring-lag", every("lag", config.lag.interval_s, stop, state, lag))
    canary = config.canary
    if canary.enabled:
        book = CanaryBook(canary.window_s, canary.lost_after_s)
        state.canary, state.canary_tenant = book, canary.tenant
        state.canary_sla = canary.availability_sla
        client = CanaryClient(public_client(gateway_config, canary), admin, canary, book)
        spawn("monitoring-canary", canary_loop(client, canary.interval_s, stop, state))
    return state


def start_for(gateway: Gateway) -> MonitoringState | None:
    """``start`` with the gateway's configuration, admin client, registry and supervisor."""
    config = gateway.config.monitoring
    if config is None or not config.enabled:
        return None
    metrics = gateway.metrics
    register = metrics.registry.register if metrics is not None else None
    supervisor = gateway.supervisor
    return start(
        config, gateway.config, gateway.broker_client, register, supervisor.spawn, supervisor.stop
    )
