"""``SaslServer``: the enabled mechanisms of one gateway process, and the checks
the session makes after authentication (re-authentication, revocation).

One per process. ``start(mechanism, host)`` gives a fresh ``ServerMechanism``
per exchange (a KIP-368 re-authentication is a new exchange). Password hashing
runs on a small dedicated thread pool (``hash_concurrency`` threads), so a flood
of PLAIN attempts costs bounded CPU and memory and never delays other work
queued on the default executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..credentials import CorruptRecord, CredentialStore, StoreError, open_store
from ..credentials.file_backend import FileBackend
from ..credentials.hashing import SCRAM_HASHES, hash_secret, new_secret, verify_secret
from .base import ServerMechanism
from .limiter import FailureLimiter
from .plain import PlainMechanism
from .scram import ScramMechanism
from .settings import SaslConfig

if TYPE_CHECKING:
    from .kerberos import KerberosAcceptor

log = logging.getLogger("kgw.sasl")
NEEDS_STORE = ("PLAIN", *SCRAM_HASHES)


class SaslServer:
    def __init__(
        self,
        mechanisms: Sequence[str],
        *,
        store: CredentialStore | None = None,
        kerberos: KerberosAcceptor | None = None,
        scram_iterations: int = 8192,
        hash_concurrency: int = 2,
        limiter: FailureLimiter | None = None,
        session_lifetime_s: float = 3600.0,
        auth_timeout_s: float = 10.0,
    ) -> None:
        unknown = set(mechanisms) - {*NEEDS_STORE, "GSSAPI"}
        if unknown:
            raise ValueError(f"unknown SASL mechanisms: {', '.join(sorted(unknown))}")
        if store is None and any(m in NEEDS_STORE for m in mechanisms):
            raise ValueError("PLAIN and SCRAM need a credential store")
        if kerberos is None and "GSSAPI" in mechanisms:
            raise ValueError("GSSAPI needs a Kerberos acceptor (keytab)")
        self._mechanisms = list(dict.fromkeys(mechanisms))
        self.store = store
        self.kerberos = kerberos
        self.scram_iterations = scram_iterations
        self.limiter = limiter if limiter is not None else FailureLimiter()
        self.session_lifetime_ms = int(session_lifetime_s * 1000)
        self.auth_timeout_s = auth_timeout_s
        self._pool = ThreadPoolExecutor(hash_concurrency, thread_name_prefix="kgw-sasl-hash")
        # an unknown API key is checked against this, at the same cost as a real one
        self._dummy_hash = hash_secret(new_secret()) if "PLAIN" in mechanisms else ""

    @classmethod
    def from_config(cls, cfg: SaslConfig) -> SaslServer:
        """Opens the credential store (lazily) and the keytab (now: a bad one fails here)."""
        store = open_store(cfg.credential_store) if cfg.credential_store is not None else None
        if store is not None:
            check_store(store)
        kerberos = None
        if "GSSAPI" in cfg.mechanisms:
            from .kerberos import KerberosAcceptor

            assert cfg.kerberos is not None
            kerberos = KerberosAcceptor(cfg.kerberos)
        limits = cfg.failure_limiter
        return cls(
            cfg.mechanisms,
            store=store,
            kerberos=kerberos,
            scram_iterations=cfg.scram_iterations,
            hash_concurrency=cfg.hash_concurrency,
            limiter=FailureLimiter(
                max_failures=limits.max_failures,
                window_s=limits.window_s,
                base_delay_s=limits.base_delay_s,
                max_delay_s=limits.max_delay_s,
                max_keys=limits.max_keys,
                lockout_address_failures=limits.lockout_address_failures,
                lockout_principal_failures=limits.lockout_principal_failures,
                lockout_s=limits.lockout_s,
            ),
            session_lifetime_s=cfg.session_lifetime_s,
            auth_timeout_s=cfg.auth_timeout_s,
        )

    def mechanisms(self) -> list[str]:
        """The enabled mechanisms, in configuration order (SaslHandshake's answer)."""
        return list(self._mechanisms)

    def start(self, mechanism: str, client_host: str) -> ServerMechanism:
        """A new exchange; ``KeyError`` if ``mechanism`` is not enabled."""
        if mechanism not in self._mechanisms:
            raise KeyError(mechanism)
        if mechanism == "PLAIN":
            assert self.store is not None
            return PlainMechanism(self.store, self.verify_secret, self._dummy_hash)
        if mechanism in SCRAM_HASHES:
            assert self.store is not None
            return ScramMechanism(mechanism, self.store, self.scram_iterations)
        assert self.kerberos is not None
        return self.kerberos.start()

    async def verify_secret(self, secret: bytes, encoded: str) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, verify_secret, secret, encoded)

    async def is_still_valid(
        self, principal: str, api_key_id: str | None, mechanism: str | None = None
    ) -> bool:
        """Whether an authenticated session may go on: False for a revoked, expired or
        re-assigned API key and for a removed SCRAM user. Pass the mechanism the session
        used; without it a principal without an API key is valid while some SCRAM
        credential of that user exists (or GSSAPI is enabled). Kerberos sessions are
        bounded by their ticket (the session lifetime), not checked here. When the
        store cannot be reached this answers True and logs: the session lifetime still
        bounds the session, and the next authentication needs the store anyway.
        """
        try:
            return await self.still_valid(principal, api_key_id, mechanism)
        except (StoreError, CorruptRecord):
            log.warning(
                "credential store unavailable; session kept until its lifetime ends",
                extra={"event": "sasl_revalidation_skipped", "principal": principal},
            )
            return True

    async def still_valid(
        self, principal: str, api_key_id: str | None, mechanism: str | None
    ) -> bool:
        """``is_still_valid``, but raising ``StoreError``/``CorruptRecord`` when the store
        cannot answer (for callers that report an outage once, not per session)."""
        if api_key_id is not None:
            if self.store is None:
                return False
            key = await self.store.api_key(api_key_id)
            return key is not None and key.usable() and key.principal == principal
        if mechanism == "GSSAPI":
            return "GSSAPI" in self._mechanisms
        if mechanism is not None and mechanism not in SCRAM_HASHES:
            return False
        if self.store is None:
            return mechanism is None and "GSSAPI" in self._mechanisms
        user = principal.removeprefix("User:")
        for candidate in [mechanism] if mechanism else list(SCRAM_HASHES):
            credential = await self.store.scram(candidate, user)
            if credential is not None and credential.principal == principal:
                return True
        return mechanism is None and "GSSAPI" in self._mechanisms

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.store is not None:
            await self.store.close()


def check_store(store: CredentialStore) -> None:
    """A credential file is read at start-up: one the gateway cannot use stops it
    (``StoreError``), and a missing one is said, since nobody can log in then."""
    backend = store.backend
    if isinstance(backend, FileBackend) and not backend.check():
        log.warning(
            "credential file %s does not exist: no API key or SCRAM user can log in until "
            "kgw apikey / kgw scram create it",
            backend.path,
            extra={"event": "credential_file_missing", "path": str(backend.path)},
        )
