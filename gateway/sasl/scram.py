"""SCRAM-SHA-256 and SCRAM-SHA-512, server side (RFC 5802, RFC 7677). No I/O but
the credential lookup.

Two client messages:

1. ``gs2-header client-first-message-bare``: the gs2 header is ``n,,`` or
   ``y,,`` (no channel binding; ``p=`` is refused, Kafka clients never bind),
   optionally with ``a=<authzid>`` equal to the user name. The bare message is
   ``n=<saslname>,r=<client nonce>[,ext=value...]``; Kafka's ``tokenauth``
   extension (delegation tokens) is refused, other extensions are ignored as
   Kafka does. Answer: ``r=<client nonce + server nonce>,s=<salt>,i=<iterations>``.
2. ``c=<base64 gs2 header>,r=<nonce>,p=<proof>``: the channel binding must
   repeat the gs2 header, the nonce must be the combined one, and the proof must
   verify against the stored key. Answer: ``v=<server signature>``, which the
   client checks.

For an unknown user the exchange runs on: a salt derived from the store's mock
seed and the user name (the same on every attempt and every instance), the
default iteration count, and random keys, so the failure at step 2 looks like a
wrong password.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable

from ..credentials import CorruptRecord, CredentialStore, ScramCredential, StoreError
from ..credentials.hashing import b64, dummy_salt, hmac_digest, scram_hash
from .base import AUTH_FAILED, Step, already_done, fail, malformed
from .plain import UNAVAILABLE

MAX_MESSAGE_BYTES = 4096
CHANNEL_BINDING_UNSUPPORTED = "Authentication failed: channel binding is not supported"
TOKENAUTH_UNSUPPORTED = "Authentication failed: delegation tokens are not supported"
AUTHZID_MISMATCH = "Authentication failed: the authorization id must equal the username"
_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)+")
_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_EXTENSION = re.compile(r"([A-Za-z0-9_]+)=([^,]*)")


def decode_saslname(value: str) -> str | None:
    if not _SASLNAME.fullmatch(value):
        return None
    return value.replace("=2C", ",").replace("=3D", "=")


def _text(data: bytes) -> str | None:
    if len(data) > MAX_MESSAGE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _parse_client_first(data: bytes) -> tuple[str, str, str, str] | Step:
    """``(gs2 header, client-first-message-bare, user, client nonce)``, or the failure."""
    message = _text(data)
    if message is None:
        return malformed("scram_encoding")
    parts = message.split(",", 2)
    if len(parts) != 3:
        return malformed("scram_first")
    flag, authz, bare = parts
    if flag.startswith("p="):
        return fail("channel_binding", None, CHANNEL_BINDING_UNSUPPORTED)
    if flag not in ("n", "y") or (authz and not authz.startswith("a=")):
        return malformed("scram_gs2_header")
    attributes = bare.split(",")
    if len(attributes) < 2 or attributes[0][:2] != "n=" or attributes[1][:2] != "r=":
        return malformed("scram_first")  # includes a mandatory extension "m="
    user = decode_saslname(attributes[0][2:])
    client_nonce = attributes[1][2:]
    if user is None or not _NONCE.fullmatch(client_nonce):
        return malformed("scram_first")
    for extension in attributes[2:]:
        found = _EXTENSION.fullmatch(extension)
        if found is None:
            return malformed("scram_extension", user)
        if found.group(1).lower() == "tokenauth":
            return fail("tokenauth", user, TOKENAUTH_UNSUPPORTED)
    if authz and decode_saslname(authz[2:]) != user:
        return fail("authzid_mismatch", user, AUTHZID_MISMATCH)
    return f"{flag},{authz},", bare, user, client_nonce


class ScramMechanism:
    def __init__(
        self,
        name: str,
        store: CredentialStore,
        default_iterations: int,
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.name = name
        self._hash = scram_hash(name)
        self._digest_size = hashlib.new(self._hash).digest_size
        self._store = store
        self._default_iterations = default_iterations
        self._new_nonce = nonce
        self._state = "first"
        self._user = ""
        self._gs2_header = ""
        self._nonce = ""
        self._auth_prefix = ""  # client-first-bare "," server-first ","
        self._credential: ScramCredential | None = None

    async def step(self, client_bytes: bytes) -> Step:
        state, self._state = self._state, "done"
        if state == "first":
            return await self._first(client_bytes)
        if state == "final":
            return self._final(client_bytes)
        return already_done()

    # -- client-first ------------------------------------------------------------------

    async def _first(self, data: bytes) -> Step:
        parsed = _parse_client_first(data)
        if isinstance(parsed, Step):
            return parsed
        gs2_header, bare, user, client_nonce = parsed
        try:
            credential = await self._store.scram(self.name, user)
            salt, iterations = await self._salt(user, credential)
        except (StoreError, CorruptRecord):
            return fail("store_unavailable", user, UNAVAILABLE)
        self._user = user
        self._credential = credential
        self._gs2_header = gs2_header
        self._nonce = client_nonce + self._new_nonce()
        server_first = f"r={self._nonce},s={b64(salt)},i={iterations}"
        self._auth_prefix = f"{bare},{server_first},"
        self._state = "final"
        return Step(challenge=server_first.encode(), done=False, claimed=user)

    async def _salt(self, user: str, credential: ScramCredential | None) -> tuple[bytes, int]:
        if credential is not None:
            return credential.salt, credential.iterations
        seed = await self._store.mock_seed()
        return dummy_salt(seed, self.name, user), self._default_iterations

    # -- client-final ------------------------------------------------------------------

    def _final(self, data: bytes) -> Step:
        user = self._user
        message = _text(data)
        if message is None:
            return malformed("scram_encoding", user)
        without_proof, sep, proof_text = message.rpartition(",p=")
        attributes = without_proof.split(",")
        if (
            not sep
            or "," in proof_text
            or len(attributes) < 2
            or not attributes[0].startswith("c=")
            or not attributes[1].startswith("r=")
        ):
            return malformed("scram_final", user)
        try:
            binding = base64.b64decode(attributes[0][2:], validate=True)
            proof = base64.b64decode(proof_text, validate=True)
        except (binascii.Error, ValueError):
            return malformed("scram_final", user)
        if binding != self._gs2_header.encode():
            return malformed("scram_channel_binding", user)
        if len(proof) != self._digest_size:
            return malformed("scram_proof", user)
        if not hmac.compare_digest(attributes[1][2:].encode(), self._nonce.encode()):
            return fail("nonce_mismatch", user)
        auth_message = (self._auth_prefix + without_proof).encode()
        credential = self._credential
        stored_key, server_key = (
            (credential.stored_key, credential.server_key)
            if credential is not None
            else (os.urandom(self._digest_size), os.urandom(self._digest_size))
        )
        signature = hmac_digest(self._hash, stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        verified = hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), stored_key)
        if credential is None:
            return fail("unknown_user", user, AUTH_FAILED)
        if not verified:
            return fail("wrong_secret", user, AUTH_FAILED)
        server_signature = hmac_digest(self._hash, server_key, auth_message)
        return Step(
            challenge=f"v={b64(server_signature)}".encode(),
            done=True,
            principal=credential.principal,
            tenant=credential.tenant,
            claimed=user,
        )
