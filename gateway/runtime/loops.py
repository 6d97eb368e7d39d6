"""The gateway's background loops: metadata refresh, idle sweep, SASL revalidation.

Each runs as a task (``Gateway.spawn``) until the gateway stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from ..sasl.revalidate import Revalidation, SessionKey, session_key
from ..upstream.client import BROKER_ERRORS

if TYPE_CHECKING:
    from .client import ClientConnection
    from .gateway import Gateway

log = logging.getLogger("kgw.server")


async def refresh_loop(gateway: Gateway) -> None:
    upstream = gateway.config.upstream
    while not gateway.stopping:
        for host, port in gateway.upstream_candidates(None):
            try:
                brokers = await gateway.broker_client.brokers((host, port))
            except BROKER_ERRORS as exc:
                log.warning(
                    "metadata refresh failed",
                    extra={
                        "event": "metadata_refresh_failed",
                        "upstream": f"{host}:{port}",
                        "reason": str(exc) or type(exc).__name__,
                    },
                )
                continue
            gateway.topology.replace_all(brokers)
            if not gateway.cluster_reachable:
                log.info(
                    "cluster reachable",
                    extra={"event": "cluster_reachable", "count": len(brokers)},
                )
            gateway.cluster_reachable = True
            break
        else:
            gateway.cluster_reachable = False
        delay = upstream.metadata_refresh_s if gateway.cluster_reachable else 1.0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gateway.supervisor.stop.wait(), delay)


async def idle_loop(gateway: Gateway) -> None:
    idle = gateway.config.limits.idle_timeout_s
    while not gateway.stopping:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gateway.supervisor.stop.wait(), min(5.0, idle / 2))
        cutoff = time.monotonic() - idle
        for conn in list(gateway.connections):
            auth = conn.session.auth
            if auth is not None and auth.expired() and conn.session.inflight == 0:
                conn.close("SASL session lifetime ended without re-authentication", "client")
            elif conn.last_activity < cutoff and conn.session.inflight == 0:
                conn.close(f"idle for more than {idle:g}s", "gateway")


async def revalidate_loop(gateway: Gateway, interval_s: float) -> None:
    assert gateway.sasl_server is not None
    revalidation = Revalidation(gateway.sasl_server)
    while not gateway.stopping:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gateway.supervisor.stop.wait(), interval_s)
        if gateway.stopping:
            return
        try:
            await revalidate_sessions(gateway, revalidation)
        except Exception:  # a bug here must not end revalidation for good
            log.exception(
                "session revalidation failed", extra={"event": "sasl_revalidation_failed"}
            )


async def revalidate_sessions(gateway: Gateway, revalidation: Revalidation) -> int:
    """Close the PLAIN and SCRAM sessions whose credentials no longer hold
    (:mod:`gateway.sasl.revalidate`): one store lookup per distinct session key, not per
    connection. Returns how many connections were closed."""
    sessions: dict[SessionKey, list[ClientConnection]] = {}
    for conn in list(gateway.connections):
        key = session_key(conn.identity, conn.session.auth)
        if key is not None:
            sessions.setdefault(key, []).append(conn)
    closed = 0
    for key in await revalidation.invalid(sessions):
        # Closed, or re-authenticated with another key (KIP-368), meanwhile: not this one.
        gone = [
            c
            for c in sessions[key]
            if not c.closed and session_key(c.identity, c.session.auth) == key
        ]
        if not gone:
            continue
        principal, api_key_id, mechanism = key
        log.warning(
            "credentials of %s (%s) revoked or removed; closing %d connection(s)",
            principal,
            f"API key {api_key_id}" if api_key_id else mechanism,
            len(gone),
            extra={
                "event": "sasl_credentials_revoked",
                "principal": principal,
                "mechanism": mechanism,
                "count": len(gone),
            },
        )
        for conn in gone:
            conn.close("credentials revoked or removed", "gateway")
        closed += len(gone)
    return closed
