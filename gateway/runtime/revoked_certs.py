"""Closing the established connections of client certificates a reloaded CRL revokes.

A listener's TLS material is reloaded when one of its files changes (checked every
``watch_interval_s``) or on SIGHUP; each successful reload calls
:func:`close_revoked_certificates` with the new material. The decision — which
certificates its CRLs revoke — is :func:`gateway.tls.revocation.revoked_among`; this
module finds the connections, logs and closes them (decision 0029). Connections
still in their handshake are checked by ``tls.accept`` when it completes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..tls.revocation import CertRef, revoked_among

if TYPE_CHECKING:
    from ..tls.material import Material
    from .client import ClientConnection
    from .gateway import Gateway
    from .listeners import ListenerSet

log = logging.getLogger("kgw.tls")
CLOSE_REASON = "client certificate revoked"


def _cert_ref(conn: ClientConnection) -> CertRef | None:
    identity = conn.identity
    if identity.cert_serial is None or identity.cert_issuer is None:
        return None
    return CertRef(identity.cert_serial, identity.cert_issuer, identity.cert_subject or "")


def close_revoked_certificates(gateway: Gateway, listener: ListenerSet, material: Material) -> int:
    """Close ``listener``'s connections whose client certificate ``material``'s CRLs
    revoke, one ``certificate_revoked`` warning each. Returns how many were closed."""
    if not material.crls:
        return 0
    refs: dict[ClientConnection, CertRef] = {}
    for conn in list(gateway.connections):
        ref = _cert_ref(conn) if conn.listener is listener and not conn.closed else None
        if ref is not None:
            refs[conn] = ref
    revoked = revoked_among(set(refs.values()), material.crls)
    closed = 0
    for conn, ref in refs.items():
        revocation = revoked.get(ref)
        if revocation is None or conn.closed:
            continue
        log.warning(
            "client certificate %s (serial %s) revoked (%s); closing its connection",
            ref.subject,
            ref.serial_hex,
            revocation.reason,
            extra={
                "event": "certificate_revoked",
                "conn": conn.conn_id,
                "listener": listener.config.name,
                "peer": conn.peer,
                "principal": conn.identity.principal,
                "subject": ref.subject,
                "serial": ref.serial_hex,
                "issuer": ref.issuer,
                "reason": revocation.reason,
            },
        )
        conn.close(CLOSE_REASON, "gateway")
        closed += 1
    return closed
