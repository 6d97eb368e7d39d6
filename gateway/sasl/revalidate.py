"""Checking live SASL sessions again: which credentials no longer hold.

The gateway's ``sasl-revalidate`` task (``sasl.revalidate_interval_s``) groups its
PLAIN and SCRAM connections by ``session_key`` and asks ``Revalidation.invalid`` which
groups lost their credentials (a revoked, expired or re-assigned API key, a removed
SCRAM user); it closes those connections. The key holds the SASL principal, which on
a listener taking its principal from the client certificate is not the connection's
principal. GSSAPI sessions have nothing in the store to revoke: their ticket bounds
them. When the store cannot answer, the sweep stops and keeps every session, with one
warning when the store goes away and one line when it is back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..credentials import CorruptRecord, StoreError

if TYPE_CHECKING:
    from ..identity import ClientIdentity
    from .connection import Authentication
    from .server import SaslServer

log = logging.getLogger("kgw.sasl")

SessionKey = tuple[str, str | None, str]  # SASL principal, API key id, mechanism


def session_key(identity: ClientIdentity, auth: Authentication | None) -> SessionKey | None:
    """What a connection's credentials are checked by; None for connections without a
    SASL login the store could revoke."""
    mechanism = identity.sasl_mechanism
    if auth is None or not auth.authenticated or auth.principal is None:
        return None
    if mechanism is None or mechanism == "GSSAPI":
        return None
    return (auth.principal, identity.api_key_id, mechanism)


class Revalidation:
    def __init__(self, server: SaslServer) -> None:
        self.server = server
        self.store_down = False

    async def invalid(self, keys: Iterable[SessionKey]) -> list[SessionKey]:
        """The keys whose credentials no longer hold, one store lookup each; none
        when the store cannot answer."""
        found = []
        for key in keys:
            try:
                valid = await self.server.still_valid(*key)
            except (StoreError, CorruptRecord) as exc:
                if not self.store_down:
                    self.store_down = True
                    log.warning(
                        "credential store unavailable (%s); live sessions kept until it is back",
                        type(exc).__name__,
                        extra={"event": "sasl_revalidation_skipped", "reason": type(exc).__name__},
                    )
                return []
            if not valid:
                found.append(key)
        if self.store_down:
            self.store_down = False
            log.info(
                "credential store available again", extra={"event": "sasl_revalidation_resumed"}
            )
        return found
