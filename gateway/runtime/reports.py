"""What the connection core reports about logins, as log lines, metrics and access-log
records (``core.commands.LoginOutcome`` and ``LockedOut``). Never a secret."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..sasl import Step
    from .client import ClientConnection

log = logging.getLogger("kgw.server")


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


def log_lockout(client: ClientConnection, kind: str, name: str, seconds: float) -> None:
    """A key locked out after repeated failures: ``kind`` "host" or "principal"."""
    who = {"host": name} if kind == "host" else {"principal": name}
    reason = "addr" if kind == "host" else "principal"
    log.warning(
        "SASL lockout after repeated failures",
        extra=client._extra("sasl_lockout", reason=reason, seconds=seconds, **who),
    )
