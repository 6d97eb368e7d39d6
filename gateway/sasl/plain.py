"""SASL/PLAIN (RFC 4616) with tenant API keys: username = key id, password = secret.

The message is ``authzid NUL authcid NUL passwd``; ``authzid`` must be empty or
equal ``authcid`` (Kafka's rule). The secret is checked against the key's scrypt
hash off the event loop. An unknown key id is checked against a dummy hash of
the same cost, and a revoked or expired key is checked too before it is refused,
so neither the answer nor its timing tells whether a key exists.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ..credentials import CorruptRecord, CredentialStore, StoreError
from ..credentials.hashing import HashFormatError
from .base import Step, already_done, fail, malformed

SecretVerifier = Callable[[bytes, str], Awaitable[bool]]
MAX_FIELD_BYTES = 255  # RFC 4616: authcid and passwd are at most 255 octets
UNAVAILABLE = "Authentication failed: credentials cannot be verified right now"
AUTHZID_MISMATCH = "Authentication failed: the authorization id must be empty or equal the username"


class PlainMechanism:
    name = "PLAIN"

    def __init__(
        self,
        store: CredentialStore,
        verify: SecretVerifier,
        dummy_hash: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._verify = verify
        self._dummy_hash = dummy_hash
        self._clock = clock
        self._done = False

    async def step(self, client_bytes: bytes) -> Step:
        if self._done:
            return already_done()
        self._done = True
        parts = client_bytes.split(b"\0")
        if len(parts) != 3:
            return malformed("plain_fields")
        raw_authzid, raw_authcid, password = parts
        try:
            authzid = raw_authzid.decode("utf-8")
            key_id = raw_authcid.decode("utf-8")
            password.decode("utf-8")
        except UnicodeDecodeError:  # the claimed name (only ever authcid) as far as it reads
            return malformed("plain_utf8", raw_authcid.decode("utf-8", "replace") or None)
        if not key_id or not password:
            return malformed("plain_empty", key_id or None)
        if len(raw_authcid) > MAX_FIELD_BYTES or len(password) > MAX_FIELD_BYTES:
            return malformed("plain_too_long", key_id)  # fail() bounds and sanitizes it
        if authzid and authzid != key_id:
            return fail("authzid_mismatch", key_id, AUTHZID_MISMATCH)
        return await self._check(key_id, password)

    async def _check(self, key_id: str, password: bytes) -> Step:
        try:
            key = await self._store.api_key(key_id)
            if key is None:
                await self._verify(password, self._dummy_hash)
                return fail("unknown_user", key_id)
            matched = await self._verify(password, key.secret_hash)
        except (StoreError, CorruptRecord, HashFormatError):
            return fail("store_unavailable", key_id, UNAVAILABLE)
        if not matched:
            return fail("wrong_secret", key_id)
        now = self._clock()
        if key.state != "active":
            return fail("revoked", key_id)
        if key.expires_at is not None and key.expires_at <= now:
            return fail("expired", key_id)
        lifetime = None
        if key.expires_at is not None:
            lifetime = max(1, int((key.expires_at - now) * 1000))
        return Step(
            challenge=b"",
            done=True,
            principal=key.principal,
            api_key_id=key.key_id,
            tenant=key.tenant,
            session_lifetime_ms=lifetime,
            claimed=key_id,
        )
