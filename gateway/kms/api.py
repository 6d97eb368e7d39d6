"""What the gateway needs from a key manager: KEKs by name, each with versions, that
wrap and unwrap DEKs without ever leaving it.

A KEK named ``acme`` (by default a tenant's name) has versions 1, 2, …; the highest is
the one new DEKs are wrapped under, every version can still unwrap (rotation). A
disabled KEK wraps nothing new but still unwraps; a destroyed one is gone with all its
versions (crypto-shredding). Backends: ``pkcs11`` (HSMs, SoftHSM2 in the tests) and
``file`` (development only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

DEK_SIZE = 32  # AES-256


class KmsError(Exception):
    """A key manager operation failed; the message names the KEK, never key material."""


class KekNotFound(KmsError):
    """No such KEK (never created, or destroyed)."""


class KekDisabled(KmsError):
    """The KEK is disabled: it wraps no new DEK."""


class KmsUnavailable(KmsError):
    """The key manager cannot be reached or refused to work."""


@dataclass(frozen=True, slots=True)
class KekInfo:
    name: str
    versions: tuple[int, ...]
    enabled: bool


@dataclass(frozen=True, slots=True)
class WrappedDek:
    """A fresh DEK (raw, for the gateway's cipher) and its wrapped form (for the
    envelope), with the KEK version that wrapped it."""

    dek: bytes = field(repr=False)  # key material: never in a repr, a log or an error
    wrapped: bytes
    version: int


class Kms(Protocol):
    """A key manager backend."""

    def new_dek(self, kek: str) -> WrappedDek: ...

    def unwrap(self, kek: str, version: int, wrapped: bytes) -> bytes: ...

    def create(self, kek: str) -> KekInfo: ...

    def rotate(self, kek: str) -> KekInfo: ...

    def disable(self, kek: str) -> KekInfo: ...

    def destroy(self, kek: str) -> int: ...

    def list_keks(self) -> list[KekInfo]: ...

    def close(self) -> None: ...
