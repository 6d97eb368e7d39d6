"""DEKs in memory: the one each KEK currently encrypts with (renewed after
``max_age_seconds`` or ``max_uses`` records), and the unwrapped DEKs decryption has
recently needed (kept ``decrypt_cache_seconds``, at most ``decrypt_cache_entries``).

The key manager is called only when a DEK must be made or unwrapped; while it is
unreachable, a cached DEK keeps serving until its bounds are reached, then the call
fails with the key manager's error. Time comes from ``clock`` (tests drive it).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..kms.api import DEK_SIZE, Kms, KmsError
from .envelope import KeyRef
from .settings import DekConfig


@dataclass(slots=True)
class _Current:
    ref: KeyRef
    aead: AESGCM
    made: float
    uses: int


class DekCache:
    def __init__(
        self, kms: Kms, config: DekConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.kms = kms
        self.config = config
        self.clock = clock
        self._current: dict[str, _Current] = {}
        self._opened: OrderedDict[tuple[str, int, bytes], tuple[AESGCM, float]] = OrderedDict()
        self.made = 0  # DEKs made (metrics, tests)
        self.unwrapped = 0

    def encryptor(self, kek: str, records: int) -> tuple[KeyRef, AESGCM]:
        """The DEK to encrypt ``records`` records under ``kek`` with; a new one when the
        current one is too old or would exceed its uses (raises ``KmsError``)."""
        now = self.clock()
        current = self._current.get(kek)
        if (
            current is None
            or now - current.made >= self.config.max_age_seconds
            or current.uses + records > self.config.max_uses
        ):
            self._current.pop(kek, None)
            fresh = self.kms.new_dek(kek)
            self.made += 1
            ref = KeyRef(kek, fresh.version, fresh.wrapped)
            current = _Current(ref, AESGCM(fresh.dek), now, 0)
            self._current[kek] = current
            self._remember((kek, fresh.version, fresh.wrapped), current.aead, now)
        current.uses += records
        return current.ref, current.aead

    def decryptor(self, ref: KeyRef) -> AESGCM:
        """The DEK ``ref`` names, unwrapped by the key manager unless recently seen."""
        now = self.clock()
        key = (ref.kek, ref.version, ref.wrapped)
        found = self._opened.get(key)
        if found is not None:
            aead, since = found
            if now - since < self.config.decrypt_cache_seconds:
                self._opened.move_to_end(key)
                return aead
            del self._opened[key]
        dek = self.kms.unwrap(ref.kek, ref.version, ref.wrapped)
        if len(dek) != DEK_SIZE:  # the gateway wraps AES-256 keys only
            raise KmsError(f"KEK {ref.kek!r} v{ref.version} unwrapped a key of the wrong size")
        aead = AESGCM(dek)
        self.unwrapped += 1
        self._remember(key, aead, now)
        return aead

    def forget(self, kek: str) -> None:
        """Drop every DEK of ``kek`` (it was disabled or destroyed here)."""
        self._current.pop(kek, None)
        for key in [k for k in self._opened if k[0] == kek]:
            del self._opened[key]

    def __len__(self) -> int:
        return len(self._opened)

    def _remember(self, key: tuple[str, int, bytes], aead: AESGCM, now: float) -> None:
        if self.config.decrypt_cache_seconds <= 0:
            return
        self._opened[key] = (aead, now)
        self._opened.move_to_end(key)
        while len(self._opened) > self.config.decrypt_cache_entries:
            self._opened.popitem(last=False)
