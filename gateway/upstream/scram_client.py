"""Client side of SASL PLAIN and SCRAM-SHA-256/512 (RFC 4616, RFC 5802, RFC 7677), no I/O.

The gateway authenticates to the brokers with its own service identity; these
produce the ``auth_bytes`` it sends and check what the broker answers, including
the broker's server signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets


class UpstreamAuthError(Exception):
    """The broker refused or misbehaved during the gateway's own authentication."""


def plain_message(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One SCRAM exchange: ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"unsupported SCRAM mechanism {mechanism}")
        self._hash = "sha256" if mechanism.endswith("256") else "sha512"
        self._username = username
        self._password = password.encode()
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._client_first_bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (ValueError, KeyError) as exc:
            raise UpstreamAuthError(f"malformed SCRAM server-first message ({exc})") from None
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise UpstreamAuthError("SCRAM server nonce does not extend the client nonce")
        if iterations < 4096:
            raise UpstreamAuthError(f"SCRAM iteration count {iterations} is below 4096")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        if text.startswith("e="):
            raise UpstreamAuthError(f"broker refused SCRAM authentication: {text[2:]}")
        if not text.startswith("v=") or self._server_signature is None:
            raise UpstreamAuthError("malformed SCRAM server-final message")
        given = base64.b64decode(text[2:].split(",")[0])
        if not hmac.compare_digest(given, self._server_signature):
            raise UpstreamAuthError("the broker's SCRAM server signature is wrong")
