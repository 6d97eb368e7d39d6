"""The envelope format (version 1) and the DEK cache's bounds."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.encryption import envelope
from gateway.encryption.deks import DekCache
from gateway.encryption.envelope import EnvelopeError, KeyRef
from gateway.encryption.settings import DekConfig
from gateway.kms.api import KekInfo, KmsUnavailable, WrappedDek

REF = KeyRef("acme", 3, b"w" * 40)


def test_layout_is_documented_format_1() -> None:
    aead = AESGCM(os.urandom(32))
    sealed = envelope.seal(aead, REF, "orders", b"secret")
    assert sealed[:4] == b"KGE\x01"
    assert sealed[4] == 0  # flags
    assert sealed[5] == 4 and sealed[6:10] == b"acme"
    assert sealed[10:12] == b"\x00\x03" and sealed[12] == 40
    assert sealed[13:53] == REF.wrapped
    assert len(sealed) == 53 + 12 + len(b"secret") + 16
    ref, flags, iv_at = envelope.key_ref(sealed)
    assert (ref, flags, iv_at) == (REF, 0, 53)
    assert envelope.open_(aead, sealed, iv_at, flags, "orders").value == b"secret"


def test_key_and_headers_inside() -> None:
    aead = AESGCM(os.urandom(32))
    hdrs = (("a", b"1"), ("b", None))
    sealed = envelope.seal(aead, REF, "t", b"v", key=b"k", headers=hdrs)
    _ref, flags, iv_at = envelope.key_ref(sealed)
    opened = envelope.open_(aead, sealed, iv_at, flags, "t")
    assert (opened.key, opened.value, opened.headers) == (b"k", b"v", hdrs)


@pytest.mark.parametrize("where", ["topic", "header", "body"])
def test_tampering_or_another_topic_does_not_decrypt(where: str) -> None:
    aead = AESGCM(os.urandom(32))
    sealed = bytearray(envelope.seal(aead, REF, "t", b"value"))
    topic = "t"
    if where == "topic":
        topic = "u"
    elif where == "header":
        sealed[12 + 41] ^= 1  # a byte of the IV
    else:
        sealed[-1] ^= 1
    _, flags, iv_at = envelope.key_ref(bytes(sealed))
    with pytest.raises(EnvelopeError, match="tag"):
        envelope.open_(aead, bytes(sealed), iv_at, flags, topic)


def test_unknown_version_and_truncation_refused() -> None:
    sealed = envelope.seal(AESGCM(os.urandom(32)), REF, "t", b"v")
    with pytest.raises(EnvelopeError, match="version 9"):
        envelope.key_ref(sealed[:3] + b"\x09" + sealed[4:])
    with pytest.raises(EnvelopeError, match="truncated"):
        envelope.key_ref(sealed[:40])


class CountingKms:
    """A stand-in key manager for the cache's arithmetic (the real backends are tested
    against SoftHSM2 and files)."""

    def __init__(self) -> None:
        self.up = True
        self.made = 0

    def new_dek(self, kek: str) -> WrappedDek:
        if not self.up:
            raise KmsUnavailable("down")
        self.made += 1
        return WrappedDek(os.urandom(32), os.urandom(40), 1)

    def unwrap(self, kek: str, version: int, wrapped: bytes) -> bytes:
        if not self.up:
            raise KmsUnavailable("down")
        return os.urandom(32)

    def create(self, kek: str) -> KekInfo: ...  # type: ignore[empty-body]
    def rotate(self, kek: str) -> KekInfo: ...  # type: ignore[empty-body]
    def disable(self, kek: str) -> KekInfo: ...  # type: ignore[empty-body]
    def destroy(self, kek: str) -> int: ...  # type: ignore[empty-body]
    def list_keks(self) -> list[KekInfo]: ...  # type: ignore[empty-body]
    def close(self) -> None: ...


def test_dek_renewed_by_uses_and_age_and_outage_bounded() -> None:
    now = [0.0]
    kms = CountingKms()
    cache = DekCache(kms, DekConfig(max_age_seconds=10, max_uses=5), clock=lambda: now[0])
    first, _ = cache.encryptor("a", 3)
    assert cache.encryptor("a", 2)[0] == first  # 5 uses: still the same DEK
    second, _ = cache.encryptor("a", 1)  # a sixth would exceed max_uses
    assert second != first and kms.made == 2
    kms.up = False
    now[0] = 9.9
    assert cache.encryptor("a", 1)[0] == second  # cached, within bounds: serves
    now[0] = 10.0
    with pytest.raises(KmsUnavailable):  # past its age: a new DEK is needed, KMS is down
        cache.encryptor("a", 1)


def test_decrypt_cache_ttl_and_size() -> None:
    now = [0.0]
    kms = CountingKms()
    config = DekConfig(decrypt_cache_seconds=5, decrypt_cache_entries=2)
    cache = DekCache(kms, config, clock=lambda: now[0])
    refs = [KeyRef("a", 1, bytes([i]) * 40) for i in range(3)]
    for ref in refs:
        cache.decryptor(ref)
    assert len(cache) == 2 and cache.unwrapped == 3
    cache.decryptor(refs[2])
    assert cache.unwrapped == 3  # a hit
    now[0] = 5.0
    kms.up = False
    with pytest.raises(KmsUnavailable):  # expired: the KMS is asked again
        cache.decryptor(refs[2])
