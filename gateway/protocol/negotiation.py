"""The first stage of the request chain: version negotiation.

ApiVersions goes to the broker (its answer is intersected with what the gateway
offers, ``api_versions.rewrite_api_versions``), or is answered in v0 when its own
version is out of range; any other request outside the advertised range is refused
with UNSUPPORTED_VERSION as a broker refuses it (``refusal.refuse_version``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..slots import NEXT, Fault, Outcome, Request, Slot
from . import apis
from .api_versions import unsupported_api_versions
from .codec import ProtocolError
from .refusal import refuse_version

if TYPE_CHECKING:
    from ..stage_api import Connection

_SASL_APIS = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate (sasl.connection)


def negotiate(session: Connection, request: Request) -> Outcome:
    key, version, correlation_id = request.key, request.version, request.correlation_id
    if key == apis.API_VERSIONS:
        own = apis.gateway_apis()[apis.API_VERSIONS]
        if not own.min_version <= version <= own.max_version:
            session.answer(request, unsupported_api_versions(correlation_id), version=0)
            return None
        session.expect(Slot(key, version, correlation_id, True, request.exchange))
        return request.data
    spec = session.advertised(key)
    if spec is not None and spec.min_version <= version <= spec.max_version:
        return NEXT
    # Before SASL completes anything but the SASL APIs closes the connection.
    auth = session.auth
    if auth is not None and not auth.authenticated and key not in _SASL_APIS:
        raise Fault("client", f"{apis.api_name(key)} sent before SASL authentication")
    try:
        reply, close = refuse_version(request.data, key, version, correlation_id)
    except ProtocolError as exc:
        raise Fault("client", str(exc)) from None
    session.answer(request, reply)
    if close:
        session.close_after_flush = f"unsupported api key {key} version {version}"
    return None
