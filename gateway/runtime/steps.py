"""A client connection's off-loop work: its pending SASL step and local work.

Each runs as a task (``Gateway.spawn``) while the connection holds the requests
that follow, then answers or forwards in the request's place and goes on with
the held ones.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal

from ..session import Fault

if TYPE_CHECKING:
    from ..sasl import Step
    from .client import ClientConnection

log = logging.getLogger("kgw.server")
LOCAL_WORK_TIMEOUT_S = 15.0  # a store write or topic count the gateway does for a request


async def run_work(client: ClientConnection) -> None:
    """Run the session's pending local work (a quota store write, a topic count), then
    answer or forward that request in its place and go on with the held ones."""
    work = client.session.pending_work
    assert work is not None
    outcome: object
    try:
        outcome = await asyncio.wait_for(work.run(), LOCAL_WORK_TIMEOUT_S)
    except Exception as exc:  # the unit answers it (an error per entry), never a stall
        log.warning(
            "local work failed: %s",
            type(exc).__name__,
            extra=client._extra("local_work_failed", reason=f"{work.name}: {type(exc).__name__}"),
        )
        outcome = exc
    if client.closed:
        return
    try:
        out = client.session.complete_work(outcome)
    except Fault as fault:
        client.fail(fault)
        return
    if out is not None:
        if client.upstream is not None:
            client.upstream.send([out])
        else:
            client._backlog.append(out)
    client.flush()
    held, client._held = client._held, []
    client.resume("working")
    if held and not client.closed:
        client._process(held)


async def run_step(client: ClientConnection) -> None:
    """Run one SASL step off the session; refuse locked-out keys without checking the
    secret, slow down repeated failures."""
    from ..sasl.base import LOCKED_OUT, fail
    from ..sasl.claims import claimed_name
    from ..sasl.limiter import address_key, principal_key

    pending = client.session.pending_step
    assert pending is not None
    mechanism = pending.mechanism.name
    limiter = client.gateway.auth_limiter
    claimed = claimed_name(mechanism, pending.auth_bytes)
    keys = [address_key(client.identity.host)]
    if claimed:
        keys.append(principal_key(claimed))
    locked = limiter is not None and limiter.locked_out(*keys)
    if locked:
        step = fail("locked_out", claimed, LOCKED_OUT)
    else:
        try:
            step = await pending.mechanism.step(pending.auth_bytes)
        except Exception as exc:  # a mechanism bug must not leave the client hanging
            log.error("SASL mechanism failed", exc_info=exc, extra=client._extra("sasl_error"))
            step = fail(f"internal error in {mechanism}", claimed)
    tenants = client.gateway.tenants
    if step.succeeded and tenants is not None and tenants.blocked(step.tenant):
        step = fail("tenant_blocked", step.claimed or step.principal)  # suspended or deleted
    if client.closed:
        return
    if step.done:
        log_authentication(client, mechanism, step)
        if not step.succeeded and limiter is not None:
            if step.claimed and principal_key(step.claimed) not in keys:
                keys.append(principal_key(step.claimed))
            delay, newly_locked = limiter.failed(*keys, refused=locked)
            for key in newly_locked:  # "addr:<host>" or "principal:<claimed, clipped>"
                kind, _, name = key.partition(":")
                who = {"host": name} if kind == "addr" else {"principal": name}
                log.warning(
                    "SASL lockout after repeated failures",
                    extra=client._extra(
                        "sasl_lockout", reason=kind, seconds=limiter.lockout_s, **who
                    ),
                )
            if delay > 0:
                await asyncio.sleep(delay)
            if client.closed:
                return
    client.session.complete_step(step)
    quotas = client.gateway.quotas
    if step.succeeded and quotas is not None and step.tenant and client._counted_tenant is None:
        refused = quotas.connection_identified(step.tenant)
        if refused is not None:
            client.close(f"connection limit: {refused}", "client")
            return
        client._counted_tenant = step.tenant
    client.flush()
    held, client._held = client._held, []
    client.resume("authenticating")
    if held and not client.closed:
        client._process(held)


def log_authentication(client: ClientConnection, mechanism: str, step: Step) -> None:
    """The ``authentication`` log line, metric and access-log ``auth`` record; a
    failure's record names the identity the client claimed (never the secret)."""
    from ..accesslog.records import auth_failure_record

    outcome: Literal["success", "failure"] = "success" if step.succeeded else "failure"
    if step.succeeded:
        client.observer.auth(outcome, step.reason)
    else:
        observer = client.observer
        if observer.access_log is not None:
            observer.access_log.record(
                auth_failure_record(
                    observer.instance,
                    client.conn_id,
                    client.identity,
                    mechanism=mechanism,
                    claimed=step.claimed,
                    reason=step.reason,
                )
            )
        if client.gateway.metrics is not None:
            client.gateway.metrics.auth_failed(client.listener.config.name, mechanism)
    log.log(
        logging.INFO if step.succeeded else logging.WARNING,
        "SASL authentication %s",
        outcome,
        extra=client._extra(
            "authentication",
            outcome=outcome,
            mechanism=mechanism,
            principal=step.principal or step.claimed,
            reason=step.reason,
        ),
    )
