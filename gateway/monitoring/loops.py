"""The health and lag loops: background tasks that ask the brokers and update the state.

They use the gateway's own ``BrokerClient`` (decision 0027), never a tenant's
connection, and sleep ``interval_s`` between rounds; a failed round is logged,
counted (``kgw_monitoring_errors_total``) and retried at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from ..upstream.client import BROKER_ERRORS, BrokerClient, BrokerUnavailable, describe
from . import probes
from .health import assess
from .lag import GroupLag, RateTracker, partition_lag, tenant_totals
from .settings import HealthConfig, LagConfig
from .state import MonitoringState
from .tenancy import TenantLabels

log = logging.getLogger("kgw.monitoring")
ROUND_ERRORS: tuple[type[Exception], ...] = (*BROKER_ERRORS, BrokerUnavailable, probes.ProbeError)


async def every(
    name: str,
    interval_s: float,
    stop: asyncio.Event,
    state: MonitoringState,
    round_: Callable[[], Awaitable[None]],
) -> None:
    """Run ``round_`` now and then every ``interval_s`` until ``stop`` is set."""
    while not stop.is_set():
        try:
            await round_()
            state.succeeded(name)
        except ROUND_ERRORS as exc:
            state.failed(name)
            log.warning(
                "monitoring round failed",
                extra={"event": "monitoring_failed", "loop": name, "reason": describe(exc)},
            )
        except Exception:  # a bug must not end monitoring for good
            state.failed(name)
            log.exception(
                "monitoring round failed", extra={"event": "monitoring_bug", "loop": name}
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


class HealthRound:
    """One collection of cluster health."""

    def __init__(
        self,
        client: BrokerClient,
        config: HealthConfig,
        state: MonitoringState,
        tenants: TenantLabels,
    ) -> None:
        self.client, self.config, self.state, self.tenants = client, config, state, tenants

    async def __call__(self) -> None:
        view = await probes.cluster_view(self.client)
        topics = {p.topic for p in view.partitions}
        min_isr = await probes.min_insync_replicas(self.client, topics)
        try:
            controller = await probes.active_controller(self.client)
        except ROUND_ERRORS:
            controller = -1
        sizes = await probes.log_sizes(self.client, view.brokers) if self.config.log_dirs else None
        self.state.health = assess(
            view.brokers,
            view.partitions,
            min_isr=min_isr,
            default_min_isr=self.config.default_min_insync_replicas,
            expected_brokers=self.config.expected_brokers,
            controller=controller,
            log_sizes=sizes,
            tenants=self.tenants,
        )


class LagRound:
    """One collection of every tenant group's lag."""

    def __init__(
        self, client: BrokerClient, config: LagConfig, state: MonitoringState, tenants: TenantLabels
    ) -> None:
        self.client, self.config, self.state, self.tenants = client, config, state, tenants
        self.rates = RateTracker(config.rate_window_s)

    async def __call__(self) -> None:
        view = await probes.cluster_view(self.client)
        groups: list[tuple[int, str, str]] = []  # coordinator, group, type
        for node, address in sorted(view.brokers.items()):
            try:
                listed = await probes.groups_on(self.client, address)
            except ROUND_ERRORS:
                continue  # a broker down: its groups move to another coordinator
            groups.extend((node, g, kind) for g, kind in listed if self.tenants.tenant_of(g))
        groups = sorted(groups, key=lambda item: item[1])[: self.config.max_groups]
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for node in sorted({node for node, _, _ in groups}):
            names = [g for n, g, _ in groups if n == node]
            committed.update(await probes.committed_offsets(self.client, view.brokers[node], names))
        wanted = {tp for offsets in committed.values() for tp in offsets}
        ends = await probes.end_offsets(self.client, view.brokers, view.leaders(), wanted)
        now = time.monotonic()
        lags: list[GroupLag] = []
        for _, group, kind in groups:
            offsets = committed.get(group)
            if offsets is None:
                continue
            tenant = self.tenants.of_resource(group)
            total_committed = sum(o for o in offsets.values() if o >= 0)
            lags.append(
                GroupLag(
                    group=group,
                    tenant=tenant,
                    group_type=kind,
                    partitions=partition_lag(offsets, ends),
                    committed=total_committed,
                    consume_rate=self.rates.observe(group, now, total_committed),
                    threshold=self.config.threshold_for(tenant),
                )
            )
        self.rates.forget_except({lag.group for lag in lags})
        self.state.lag = lags
        self.state.tenant_lag = tenant_totals(lags)
        self.state.thresholds = {t: self.config.threshold_for(t) for t in self.state.tenant_lag}
