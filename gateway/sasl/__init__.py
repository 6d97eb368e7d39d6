"""SASL terminated at the gateway: the server side of PLAIN (tenant API keys),
SCRAM-SHA-256/512 and GSSAPI (Kerberos), as sans-IO state machines. The session
feeds each mechanism the client's ``auth_bytes`` and sends back ``Step.challenge``.

| module | concern | I/O |
| --- | --- | --- |
| ``base`` | ``Step``, ``ServerMechanism``, client-safe messages, ``clip`` (claimed names) | none |
| ``claims`` | the name a first message claims, read before the mechanism runs (lockout) | none |
| ``plain`` | PLAIN with API keys | credential lookup; hashing off the loop |
| ``scram`` | SCRAM-SHA-256/512 (RFC 5802/7677) | credential lookup |
| ``kerberos`` | GSSAPI (RFC 4752) with ``gssapi`` and a keytab | keytab, in a thread |
| ``kerberos_rules`` | ``principal_to_local_rules`` (Kafka syntax) | none |
| ``limiter`` | ``FailureLimiter``: delays and lockouts after repeated failures | none |
| ``server`` | ``SaslServer``: enabled mechanisms, revalidation | via the store |
| ``connection`` | ``Authentication``: a connection's handshake, steps, lifetime (KIP-368) | none |
| ``settings`` | the ``sasl`` configuration section | none |

Credentials themselves live in ``gateway/credentials``.
"""

from __future__ import annotations

from .base import AUTH_FAILED, ServerMechanism, Step
from .limiter import FailureLimiter, address_key, principal_key
from .server import SaslServer
from .settings import SaslConfig

__all__ = [
    "AUTH_FAILED",
    "FailureLimiter",
    "SaslConfig",
    "SaslServer",
    "ServerMechanism",
    "Step",
    "address_key",
    "principal_key",
]
