"""The name a client claims in its first SASL message, read before anything is checked.

The lockout (``FailureLimiter.locked_out``) must refuse an attempt without hashing its
secret, so the session needs the claimed name before the mechanism runs. This reads
it the way the mechanisms do, leniently, and never returns anything but the name:
PLAIN's authcid (the API key id, never the password field), SCRAM's ``n=`` user
from the client-first message. GSSAPI's name is known only once the Kerberos context
is accepted, and later messages of an exchange claim nothing: both give ``None``.
The result is bounded and sanitized (``base.clip``): the client controls it.
"""

from __future__ import annotations

from .base import clip
from .scram import MAX_MESSAGE_BYTES, decode_saslname

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def claimed_name(mechanism: str, client_bytes: bytes) -> str | None:
    """The name ``client_bytes`` claims under ``mechanism``, or None."""
    if mechanism == "PLAIN":
        return _plain(client_bytes)
    if mechanism in SCRAM:
        return _scram_first(client_bytes)
    return None


def _plain(data: bytes) -> str | None:
    parts = data.split(b"\0")
    if len(parts) != 3 or not parts[1]:
        return None  # not authzid NUL authcid NUL passwd: no field is safely the name
    return clip(parts[1].decode("utf-8", "replace"))


def _scram_first(data: bytes) -> str | None:
    if len(data) > MAX_MESSAGE_BYTES:
        return None
    text = data.decode("utf-8", "replace")
    parts = text.split(",", 2)
    if len(parts) != 3 or not parts[2].startswith("n="):
        return None  # also the client-final message (c=...,r=...,p=...)
    user = decode_saslname(parts[2][2:].split(",", 1)[0])
    return None if user is None else clip(user)
