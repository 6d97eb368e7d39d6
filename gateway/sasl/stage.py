"""The authentication stage of the request chain (SASL listeners only).

SaslHandshake is answered here; SaslAuthenticate takes its place in the response
order and waits as the session's ``pending_step`` while the core runs the mechanism
(``finish_step`` queues the answer); before authentication succeeded, or after the
session's lifetime ended without KIP-368 re-authentication, any other request closes
the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import apis
from ..protocol.codec import encode_response
from ..slots import NEXT, Fault, Outcome, Request, Slot
from .connection import SASL_APIS, SASL_AUTHENTICATE, SASL_HANDSHAKE

if TYPE_CHECKING:
    from ..stage_api import Connection
    from .base import Step


def authenticate(session: Connection, request: Request) -> Outcome:
    auth = session.auth
    assert auth is not None
    key = request.key
    if key not in SASL_APIS:
        if not auth.authenticated:
            raise Fault("client", f"{apis.api_name(key)} sent before SASL authentication")
        if auth.expired():
            raise Fault("client", "SASL session lifetime ended without re-authentication")
        return NEXT
    body = request.body
    version, correlation_id = request.version, request.correlation_id
    if key == SASL_HANDSHAKE:
        response, refused = auth.handshake(body, apis.response_schema(key, version))
        session.answer(request, encode_response(key, version, correlation_id, response))
        if refused is not None:
            session.close_after_flush = f"SASL handshake refused: {refused}"
        return None
    if session.pending_step is not None:
        raise Fault("client", "SaslAuthenticate sent while the previous step is running")
    pending = auth.begin(body, version, correlation_id)
    if pending is None:
        raise Fault("client", "SaslAuthenticate without a SaslHandshake")
    session.hold_step(pending, Slot(key, version, correlation_id, False, request.exchange))
    return None


def finish_step(session: Connection, step: Step) -> None:
    """The core ran ``pending_step``: its answer takes the request's place."""
    auth, pending, slot = session.auth, session.pending_step, session.step_slot
    assert auth is not None and pending is not None and slot is not None
    session.pending_step = session.step_slot = None
    response_cls = apis.response_schema(SASL_AUTHENTICATE, pending.api_version)
    response = auth.finish(pending, step, response_cls)
    slot.data = encode_response(
        SASL_AUTHENTICATE, pending.api_version, pending.correlation_id, response
    )
    if response.error_code != 0:
        session.close_after_flush = "SASL authentication failed"
