"""The gateway's background tasks: started together, named, kept, logged, stopped.

``Supervisor.spawn`` is the one way a task is created on the data path (a connection's
SASL step or local work, an upstream connect) and for the background loops; each task
is named, referenced until done, and logged if it fails. ``start_background`` starts
the loops the configuration calls for; ``stop`` is the event they all watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .heap import heap_loop
from .loops import idle_loop, refresh_loop, revalidate_loop

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("kgw.server")


class Supervisor:
    """Every task the gateway runs, and the event that tells them to stop."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.stop = asyncio.Event()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Create a task that is named, referenced until done, and logged if it fails."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "task failed",
                exc_info=task.exception(),
                extra={"event": "task_failed", "reason": task.get_name()},
            )

    def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()


def start_background(gateway: Gateway) -> None:
    """The background loops and watchers the configuration calls for."""
    spawn, stop = gateway.supervisor.spawn, gateway.supervisor.stop
    spawn("metadata-refresh", refresh_loop(gateway))
    if gateway.accesslog is not None:
        spawn("accesslog", gateway.accesslog.run())
    if gateway.quotas is not None:
        spawn("quotas", gateway.quotas.run(stop))
    if gateway.policy is not None:
        spawn("policy-watch", gateway.policy.watch(stop))
    tenants = gateway.tenants
    if tenants is not None:
        spawn("tenant-watch", tenants.run(stop, gateway.close_tenants))
    sasl = gateway.config.sasl
    if (
        gateway.sasl_server is not None
        and gateway.sasl_server.store is not None  # GSSAPI alone: nothing to revoke
        and sasl is not None
        and sasl.revalidate_interval_s > 0
    ):
        spawn("sasl-revalidate", revalidate_loop(gateway, sasl.revalidate_interval_s))
    if gateway.shared_failures is not None:
        spawn("sasl-shared-failures", gateway.shared_failures.run())
    spawn("idle-sweeper", idle_loop(gateway))
    spawn("heap", heap_loop(gateway))  # after the loops above built what they keep
    if gateway.broker_enforcement is not None:

        def blocked() -> frozenset[str]:
            return tenants.blocked_tenants if tenants is not None else frozenset()

        gateway.broker_enforcement.start(spawn, stop, blocked)
    if gateway.config.monitoring is not None and gateway.config.monitoring.enabled:
        from ..monitoring.service import start_for  # background loops, off the data path

        start_for(gateway)
    for material in gateway.tls_material():
        spawn(f"tls-watch-{material.name}", material.watch(stop))
