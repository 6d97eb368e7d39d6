"""Credentials for SASL: tenant API keys (PLAIN) and SCRAM credentials.

| module | concern | I/O |
| --- | --- | --- |
| ``hashing`` | secrets, scrypt hashes, SCRAM key derivation | none (CPU) |
| ``model`` | ``ApiKey``, ``ScramCredential``, their records and public views | none |
| ``store`` | ``CredentialStore`` (validation, hooks, cache); ``Backend`` | via a backend |
| ``file_backend`` | one JSON file (0600, locked, atomic writes) | files, in threads |
| ``redis_backend`` | Redis hashes shared by every instance | asyncio |
| ``settings`` | the ``sasl.credential_store`` configuration section | none |
"""

from __future__ import annotations

from .model import ApiKey, CorruptRecord, InvalidCredential, ScramCredential
from .settings import CredentialStoreConfig
from .store import Backend, CredentialStore, Hook, StoreError


def open_store(config: CredentialStoreConfig) -> CredentialStore:
    """The store a configuration names (nothing is contacted until first use)."""
    backend: Backend
    if config.file is not None:
        from .file_backend import FileBackend

        backend = FileBackend(config.file)
    else:
        from .redis_backend import RedisBackend

        assert config.redis_url is not None
        backend = RedisBackend(config.redis_url, config.redis_prefix)
    return CredentialStore(backend, cache_ttl_s=config.cache_ttl_s)


__all__ = [
    "ApiKey",
    "Backend",
    "CorruptRecord",
    "CredentialStore",
    "CredentialStoreConfig",
    "Hook",
    "InvalidCredential",
    "ScramCredential",
    "StoreError",
    "open_store",
]
