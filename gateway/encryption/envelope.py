"""The encrypted record's value: a versioned envelope (format 1, ``docs/encryption.md``).
No I/O: the DEK is given, raw, by the caller.

    "KGE" | version u8 (1) | flags u8 | kek name length u8 | kek name (UTF-8)
    | kek version u16 | wrapped DEK length u8 | wrapped DEK | IV (12 bytes)
    | AES-256-GCM ciphertext and 16-byte tag

flags: 1 the record's key is inside (the record carries a null key), 2 its headers
are inside (it carries none). The associated data is everything before the
ciphertext plus the topic's name, so an envelope moved to another topic, or with its
header changed, does not decrypt. The plaintext is the value alone when neither flag
is set; otherwise ``value, [key], [headers]`` each as i32 length (-1: null) + bytes,
headers as i32 count then (u16 name length, name, i32 length, value) each.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"KGE"
VERSION = 1
KEY_INSIDE = 0x01
HEADERS_INSIDE = 0x02
IV_SIZE = 12
TAG_SIZE = 16

Headers = tuple[tuple[str, bytes | None], ...]


class EnvelopeError(ValueError):
    """Not a well-formed envelope, an unknown version, or it does not decrypt."""


@dataclass(frozen=True, slots=True)
class KeyRef:
    """Which KEK (name and version at the key manager) wrapped the DEK, and the wrapped
    DEK: all that is needed to get the DEK back."""

    kek: str
    version: int
    wrapped: bytes


@dataclass(frozen=True, slots=True)
class Opened:
    key: bytes | None
    value: bytes | None
    headers: Headers


def is_envelope(value: bytes | None) -> bool:
    return value is not None and len(value) > 4 and value[:3] == MAGIC


def pack_ref(ref: KeyRef) -> bytes:
    """The key reference as every format writes it: KEK name length u8, name (UTF-8),
    KEK version u16, wrapped DEK length u8, wrapped DEK."""
    name = ref.kek.encode("utf-8")
    if not 0 < len(name) < 256 or not 0 < len(ref.wrapped) < 256:
        raise EnvelopeError("KEK name and wrapped DEK must be 1..255 bytes")
    return b"".join(
        (bytes((len(name),)), name, struct.pack(">HB", ref.version, len(ref.wrapped)), ref.wrapped)
    )


def unpack_ref(data: bytes | memoryview, at: int) -> tuple[KeyRef, int]:
    """The key reference ``pack_ref`` wrote at ``at``, and the position after it (the
    caller checks that what follows fits)."""
    size = data[at]
    pos = at + 1 + size
    if not size or pos + 3 > len(data):
        raise EnvelopeError("envelope header truncated")
    try:
        name = bytes(data[at + 1 : pos]).decode("utf-8")
    except UnicodeDecodeError:
        raise EnvelopeError("KEK name is not UTF-8") from None
    version, wrapped_size = struct.unpack_from(">HB", data, pos)
    pos += 3
    end = pos + wrapped_size
    return KeyRef(name, version, bytes(data[pos:end])), end


def header(ref: KeyRef, flags: int, iv: bytes) -> bytes:
    return b"".join((MAGIC, bytes((VERSION, flags)), pack_ref(ref), iv))


def seal(
    aead: AESGCM,
    ref: KeyRef,
    topic: str,
    value: bytes | None,
    key: bytes | None = None,
    headers: Headers | None = None,
) -> bytes:
    """The envelope of ``value`` (and ``key``/``headers`` when given: they go inside)."""
    flags = (KEY_INSIDE if key is not None else 0) | (HEADERS_INSIDE if headers is not None else 0)
    iv = os.urandom(IV_SIZE)
    head = header(ref, flags, iv)
    plain = _pack(value, key if flags & KEY_INSIDE else None, headers) if flags else value or b""
    return head + aead.encrypt(iv, plain, head + topic.encode("utf-8"))


def key_ref(envelope: bytes) -> tuple[KeyRef, int, int]:
    """The envelope's key reference, flags and where its IV starts."""
    if not is_envelope(envelope):
        raise EnvelopeError("not an envelope")
    if envelope[3] != VERSION:
        raise EnvelopeError(f"envelope version {envelope[3]} is not supported")
    if len(envelope) < 6:
        raise EnvelopeError("envelope header truncated")
    flags = envelope[4]
    ref, iv_at = unpack_ref(envelope, 5)
    if iv_at + IV_SIZE + TAG_SIZE > len(envelope):
        raise EnvelopeError("envelope truncated")
    return ref, flags, iv_at


def open_(aead: AESGCM, envelope: bytes, iv_at: int, flags: int, topic: str) -> Opened:
    """Decrypt with the DEK's ``aead``; ``EnvelopeError`` when the tag does not match."""
    body = iv_at + IV_SIZE
    try:
        plain = aead.decrypt(
            envelope[iv_at:body], envelope[body:], envelope[:body] + topic.encode("utf-8")
        )
    except InvalidTag:
        raise EnvelopeError("authentication tag mismatch (corrupt, or another key)") from None
    if not flags:
        return Opened(None, plain, ())
    return _unpack(plain, flags)


def _field(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _pack(value: bytes | None, key: bytes | None, headers: Headers | None) -> bytes:
    parts = [_field(value)]
    if key is not None:
        parts.append(_field(key))
    if headers is not None:
        parts.append(struct.pack(">i", len(headers)))
        for name, data in headers:
            encoded = name.encode("utf-8")
            parts.append(struct.pack(">H", len(encoded)) + encoded + _field(data))
    return b"".join(parts)


def _unpack(plain: bytes, flags: int) -> Opened:
    pos = 0

    def take() -> bytes | None:
        nonlocal pos
        (size,) = struct.unpack_from(">i", plain, pos)
        pos += 4
        if size == -1:
            return None
        if size < 0 or pos + size > len(plain):
            raise EnvelopeError("sealed fields truncated")
        out = plain[pos : pos + size]
        pos += size
        return out

    try:
        value = take()
        key = take() if flags & KEY_INSIDE else None
        headers: list[tuple[str, bytes | None]] = []
        if flags & HEADERS_INSIDE:
            (count,) = struct.unpack_from(">i", plain, pos)
            pos += 4
            for _ in range(count):
                (size,) = struct.unpack_from(">H", plain, pos)
                name = plain[pos + 2 : pos + 2 + size].decode("utf-8")
                pos += 2 + size
                headers.append((name, take()))
    except (struct.error, UnicodeDecodeError):
        raise EnvelopeError("sealed fields malformed") from None
    return Opened(key, value, tuple(headers))
