"""Who is on the other end of a client connection.

Filled by the network layer (address, TLS details) and by authentication
(principal); read by authorization and the logs. Secrets never live here.
"""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class ClientIdentity:
    listener: str
    host: str
    port: int
    principal: str = ANONYMOUS
    tls_version: str | None = None
    tls_cipher: str | None = None
    cert_subject: str | None = None
    cert_serial: int | None = None  # with cert_issuer: which certificate, for revocation
    cert_issuer: str | None = None  # the issuer's DN, RFC 4514
    sasl_mechanism: str | None = None
    api_key_id: str | None = None
    tenant: str | None = None
