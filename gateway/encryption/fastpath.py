"""The common cases of sealing and opening a v2 batch's records without building a
``Record`` per record: values only (the default policy), the record's other bytes
copied as they are. No I/O.

``batch.parse``/``batch.encode`` turn every record into an object and back, which
costs more than the AES-GCM of a 100-byte value. Here the records are scanned once:
each record's bytes before its value (attributes, timestamp and offset deltas, key)
and after it (headers) are copied as slices, only the value is replaced, and the
record's length prefix is written again. Headers are walked (count and lengths
checked) but not decoded. Anything this module does not handle — key or headers
sealed inside, envelopes with flags, a batch needing several DEKs — goes through the
general path in ``records``; both produce the same bytes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import crc32c
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import envelope
from .batch import COMPRESSION_MASK, CRC_START, HEADER_SIZE, BatchError, checked
from .compression import compress
from .envelope import IV_SIZE, MAGIC, TAG_SIZE, EnvelopeError, KeyRef

MIN_RECORD_SIZE = 7  # length, attributes, two deltas, key, value, headers: a byte each

_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")
# zig-zag varints of 0..63 and of -1 are one byte: precomputed
_SMALL = [bytes([n << 1]) for n in range(64)]
_NULL = b"\x01"


_TABLE_SIZE = 1 << 14  # varints of lengths up to 16 KiB: precomputed (~0.6 MB)


def _encode_zigzag(value: int) -> bytes:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_TABLE = [_encode_zigzag(n) for n in range(_TABLE_SIZE)]


def zigzag(value: int) -> bytes:
    """Kafka's varint (zig-zag) of ``value`` as bytes."""
    if 0 <= value < _TABLE_SIZE:
        return _TABLE[value]
    return _encode_zigzag(value)


def varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` (before ``end``) and the position after it."""
    if pos < end and (byte := data[pos]) < 0x80:  # one byte: most of them
        return (byte >> 1) ^ -(byte & 1), pos + 1
    shift = 0
    result = 0
    while True:
        if pos >= end:
            raise BatchError("varint runs past the end")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise BatchError("varint too long")


class Head:
    """A whole v2 batch's header fields and its records' bytes (decompressed)."""

    __slots__ = ("attributes", "body", "count", "data")

    def __init__(self, data: bytes) -> None:
        fields, body = checked(data)
        attrs, count = fields[5], fields[12]
        if count < 0:
            raise BatchError("negative record count")
        if count > len(body) // MIN_RECORD_SIZE:  # every record takes 7 bytes at least
            raise BatchError(f"record count {count} is more than the batch's bytes hold")
        self.data = data
        self.attributes = attrs
        self.count = count
        self.body = body

    def rebuild(self, records: list[bytes]) -> bytes:
        """The batch with its records replaced (same header fields), compressed again
        with its codec, length and CRC-32C set."""
        body = b"".join(records)
        codec = self.attributes & COMPRESSION_MASK
        if codec:
            body = compress(codec, body)
        out = bytearray(self.data[:HEADER_SIZE])
        out += body
        _LENGTH.pack_into(out, 8, len(out) - 12)
        _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
        return bytes(out)


def _records(head: Head, rewrite: Callable[[int, int], bytes | None]) -> list[bytes]:
    """The records' bytes, in pieces, with each value replaced by ``rewrite(start, end)``
    of the value's span in ``head.body`` (``None``: the record unchanged).

    Varints of one byte (and the value's length, of two) are read inline: a record of
    100 bytes has six varints, and a call each would cost more than its AES-GCM."""
    body = head.body
    size = len(body)
    out: list[bytes] = []
    append = out.append
    pos = 0
    try:
        for _ in range(head.count):
            byte = body[pos]  # the record's length
            if byte < 0x80:
                start = pos + 1
                length = (byte >> 1) ^ -(byte & 1)
            elif body[pos + 1] < 0x80:
                raw = (byte & 0x7F) | (body[pos + 1] << 7)
                start = pos + 2
                length = (raw >> 1) ^ -(raw & 1)
            else:
                length, start = varint(body, pos, size)
            end = start + length
            if length < 1 or end > size:
                raise BatchError("record runs past the end")
            at = start + 1  # after the attributes: timestamp delta, offset delta
            if body[at] < 0x80:
                at += 1
            elif body[at + 1] < 0x80:
                at += 2
            else:
                at = varint(body, at, end)[1]
            if body[at] < 0x80:
                at += 1
            elif body[at + 1] < 0x80:
                at += 2
            else:
                at = varint(body, at, end)[1]
            byte = body[at]  # the key's length
            if byte == 1:  # null
                at += 1
            elif byte < 0x80:
                if byte & 1:
                    raise BatchError("negative key length")
                at += 1 + (byte >> 1)
            else:
                klen, at = varint(body, at, end)
                if klen < -1:
                    raise BatchError("negative key length")
                at += max(klen, 0)
            value_at = at
            byte = body[at]  # the value's length
            if byte < 0x80:
                vlen = (byte >> 1) ^ -(byte & 1)
                at += 1
            elif body[at + 1] < 0x80:
                raw = (byte & 0x7F) | (body[at + 1] << 7)
                vlen = (raw >> 1) ^ -(raw & 1)
                at += 2
            else:
                vlen, at = varint(body, at, end)
            if vlen < -1:
                raise BatchError("negative value length")
            value_end = at + max(vlen, 0)
            # headers: none (one zero byte), or walked
            hp = value_end + 1 if body[value_end] == 0 else _headers(body, value_end, end)
            if hp != end or at > end:
                raise BatchError("record length does not match its fields")
            new = None if vlen < 0 else rewrite(at, value_end)
            if new is None:
                append(body[pos:end])
            else:
                size_of_value = zigzag(len(new))
                length = (value_at - start) + len(size_of_value) + len(new) + (end - value_end)
                append(zigzag(length))
                append(body[start:value_at])
                append(size_of_value)
                append(new)
                append(body[value_end:end])
            pos = end
    except IndexError:
        raise BatchError("record runs past the end") from None
    if pos != size:
        raise BatchError("bytes left after the last record")
    return out


def _headers(body: bytes, pos: int, end: int) -> int:
    """Walk a record's headers (count, then name and value by varint length each),
    not decoding them: where they end."""
    count, pos = varint(body, pos, end)
    if count < 0:
        raise BatchError("negative header count")
    for _header in range(count):
        size, pos = varint(body, pos, end)
        if size < 0:
            raise BatchError("header key is null")
        pos += size
        size, pos = varint(body, pos, end)
        if size < -1:
            raise BatchError("negative header value length")
        pos += max(size, 0)
    return pos


def seal_batch(head: Head, aead: AESGCM, ref: KeyRef, topic: bytes) -> bytes:
    """The batch with every non-null value sealed (envelope flags 0)."""
    prefix = envelope.header(ref, 0, b"")
    ivs = os.urandom(IV_SIZE * max(head.count, 1))
    body = head.body
    encrypt = aead.encrypt
    index = 0

    def seal(start: int, end: int) -> bytes:
        nonlocal index
        iv = ivs[index : index + IV_SIZE]
        index += IV_SIZE
        sealed_head = prefix + iv
        return sealed_head + encrypt(iv, body[start:end], sealed_head + topic)

    return head.rebuild(_records(head, seal))


def open_batch(head: Head, decryptor: Callable[[KeyRef], AESGCM], topic: bytes) -> bytes | None:
    """The batch with its envelopes (flags 0) opened (its own bytes when it holds
    none); ``None`` when an envelope has flags (key or headers inside): the caller
    takes the general path."""
    body = head.body
    known: dict[bytes, tuple[AESGCM, int]] = {}  # envelope header up to the IV -> DEK
    # the last envelope header (up to the IV) seen, its DEK and its length
    prefix, aead, iv_at = b"\x00", AESGCM(bytes(32)), 0
    opened = 0

    def open_(start: int, end: int) -> bytes | None:
        nonlocal opened, prefix, aead, iv_at
        if end - start < 5 or not body.startswith(MAGIC, start):
            return None
        if not body.startswith(prefix, start):
            value = body[start:end]
            iv_at = _iv_at(value)
            prefix = value[:iv_at]
            found = known.get(prefix)
            if found is None:
                ref, flags, _ = envelope.key_ref(value)
                if flags:
                    raise _HasFlags
                found = (decryptor(ref), iv_at)
                known[prefix] = found
            aead, iv_at = found
        at = start + iv_at
        cut = at + IV_SIZE
        if end - cut < TAG_SIZE:
            raise EnvelopeError("envelope truncated")
        opened += 1
        try:
            return aead.decrypt(body[at:cut], body[cut:end], body[start:cut] + topic)
        except InvalidTag:
            raise EnvelopeError("authentication tag mismatch (corrupt, or another key)") from None

    try:
        records = _records(head, open_)
    except _HasFlags:
        return None
    return head.rebuild(records) if opened else head.data


class _HasFlags(Exception):
    """An envelope with the key or headers inside: not this module's case."""


def _iv_at(value: bytes) -> int:
    """Where an envelope's IV starts (its header checked by ``envelope.key_ref`` the
    first time that header is seen in a batch)."""
    if len(value) < 6:
        raise EnvelopeError("envelope header truncated")
    pos = 6 + value[5]
    if pos + 3 > len(value):
        raise EnvelopeError("envelope header truncated")
    iv_at = pos + 3 + value[pos + 2]
    if iv_at + IV_SIZE + TAG_SIZE > len(value):
        raise EnvelopeError("envelope truncated")
    return iv_at
