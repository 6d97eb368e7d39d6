"""Wire format version 2: a whole record batch sealed in one envelope (granularity
``batch``, ``docs/encryption.md``). No I/O: the DEK is given by the caller.

The producer's records section, as it sent it (compressed with its codec, if any), is
encrypted in one AES-256-GCM operation. What goes to the broker is a valid magic-v2
batch with the producer's header fields (producer id, epoch, base sequence,
transactional bit) and the same record count, uncompressed, whose records are:

- record 0: null key, no headers, offset delta 0, value = the envelope::

    "KGE" | version u8 (2) | flags u8 (0) | codec u8 | kek name length u8 | kek name
    | kek version u16 | wrapped DEK length u8 | wrapped DEK | base timestamp i64
    | IV (12 bytes) | AES-256-GCM ciphertext and 16-byte tag

- records 1..N-1: placeholders (null key, null value, no headers, offset delta i).

Every record has timestamp delta 0 and the batch's base timestamp is the largest
timestamp of the producer's records, so the maximum the broker computes (and writes
into the header, for CreateTime) is the producer's; the original base timestamp is in
the envelope. The associated data is the envelope header (everything before the
ciphertext), the record count (i32) and the topic's name: fields the broker rewrites
(base offset, leader epoch, LogAppendTime max timestamp, CRC) are not bound.

Opening takes the header of the batch as fetched (the broker's base offset, leader
epoch, timestamp type and LogAppendTime max timestamp, producer fields), puts back
the base timestamp and codec, and the records section decrypted: the client gets the
producer's records byte for byte.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import crc32c
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .batch import COMPRESSION_MASK, CRC_START, HEADER, HEADER_SIZE, BatchError
from .envelope import IV_SIZE, MAGIC, TAG_SIZE, EnvelopeError, KeyRef, pack_ref, unpack_ref
from .fastpath import Head, _headers, varint, zigzag

VERSION = 2
PREFIX = MAGIC + bytes((VERSION,))
_TIMESTAMP = struct.Struct(">q")
_COUNT = struct.Struct(">i")
_CRC = struct.Struct(">I")


def _placeholder(index: int) -> bytes:
    delta = zigzag(index)
    return bytes(((5 + len(delta)) << 1, 0, 0)) + delta + b"\x01\x01\x00"


class _Placeholders:
    """The bytes of placeholder records 1..n-1, concatenated: precomputed and grown by
    doubling up to ``cap`` records (~0.5 MB), sliced per batch (no loop per record).
    A larger batch (rare: over 64 Ki records) gets the rest made for it, not kept."""

    def __init__(self, size: int = 1 << 12, cap: int = 1 << 16) -> None:
        self.cap = cap
        self.table = b""
        self.ends = [0, 0]  # ends[n]: where the placeholders of an n-record batch end
        self._grow(min(size, cap))

    def _grow(self, size: int) -> None:
        parts = [self.table]
        end = self.ends[-1]
        for index in range(len(self.ends) - 1, size):
            record = _placeholder(index)
            parts.append(record)
            end += len(record)
            self.ends.append(end)
        self.table = b"".join(parts)

    def of(self, count: int) -> bytes | memoryview:
        """The placeholders of a batch of ``count`` records (records 1..count-1)."""
        if count >= len(self.ends) and len(self.ends) <= self.cap:
            self._grow(min(self.cap, max(count + 1, 2 * (len(self.ends) - 1))))
        if count < len(self.ends):
            return memoryview(self.table)[: self.ends[count]]
        rest = (_placeholder(i) for i in range(len(self.ends) - 1, count))
        return b"".join((self.table, *rest))


PLACEHOLDERS = _Placeholders()


def header(ref: KeyRef, codec: int, base_timestamp: int, iv: bytes) -> bytes:
    return b"".join((PREFIX, bytes((0, codec)), pack_ref(ref), _TIMESTAMP.pack(base_timestamp), iv))


def _max_delta(body: bytes, count: int) -> int:
    """Walk the producer's records (decompressed): each well formed, offset deltas
    0..count-1, nothing left over; the largest timestamp delta. Varints of one byte
    (most) are read inline: a call each would cost more than the record's AES-GCM."""
    pos = 0
    size = len(body)
    top = None
    try:
        for index in range(count):
            byte = body[pos]
            if byte < 0x80:
                length, start = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                length, start = varint(body, pos, size)
            end = start + length
            if length < 6 or end > size:
                raise BatchError("record runs past the end")
            byte = body[start + 1]
            if byte < 0x80:
                delta, at = (byte >> 1) ^ -(byte & 1), start + 2
            else:
                delta, at = varint(body, start + 1, end)
            byte = body[at]
            if byte < 0x80:
                offset, at = (byte >> 1) ^ -(byte & 1), at + 1
            else:
                offset, at = varint(body, at, end)
            if offset != index:
                raise BatchError(f"record {index} has offset delta {offset}")
            byte = body[at]  # the key's length
            if byte < 0x80:
                if byte & 1 and byte != 1:
                    raise BatchError("negative key length")
                at += 1 + (byte >> 1 if byte != 1 else 0)
            else:
                length, at = varint(body, at, end)
                if length < -1:
                    raise BatchError("negative key length")
                at += max(length, 0)
            byte = body[at]  # the value's length
            if byte < 0x80:
                if byte & 1 and byte != 1:
                    raise BatchError("negative value length")
                at += 1 + (byte >> 1 if byte != 1 else 0)
            else:
                length, at = varint(body, at, end)
                if length < -1:
                    raise BatchError("negative value length")
                at += max(length, 0)
            if body[at] == 0:  # no headers
                at += 1
            else:
                at = _headers(body, at, end)
            if at != end:
                raise BatchError("record length does not match its fields")
            if top is None or delta > top:
                top = delta
            pos = end
    except IndexError:
        raise BatchError("record runs past the end") from None
    if pos != size:
        raise BatchError("bytes left after the last record")
    return top or 0


def seal(head: Head, aead: AESGCM, ref: KeyRef, topic: bytes) -> bytes:
    """The batch ``head`` (a producer's, checked, records decompressed in ``head.body``)
    as one envelope record and placeholders; ``BatchError`` when its records are not
    well formed (the broker would have refused them; sealed, nobody could check)."""
    fields = HEADER.unpack_from(head.data, 0)
    (base, _, epoch, _, _, attrs, last, base_ts, _, pid, pepoch, seq, count) = fields
    if count < 1 or last != count - 1:
        raise BatchError(f"{count} records but last offset delta {last}")
    top = base_ts + _max_delta(head.body, count)
    iv = os.urandom(IV_SIZE)
    envelope_head = header(ref, attrs & COMPRESSION_MASK, base_ts, iv)
    sealed = envelope_head + aead.encrypt(
        iv, head.data[HEADER_SIZE:], envelope_head + _COUNT.pack(count) + topic
    )
    size_of_value = zigzag(len(sealed))
    record = b"\x00\x00\x00\x01" + size_of_value  # attributes, ts 0, offset 0, null key
    record_length = zigzag(len(record) + len(sealed) + 1)
    placeholders = PLACEHOLDERS.of(count)
    body_size = len(record_length) + len(record) + len(sealed) + 1 + len(placeholders)
    out = bytearray(
        HEADER.pack(
            base,
            HEADER_SIZE - 12 + body_size,
            epoch,
            2,
            0,
            attrs & ~COMPRESSION_MASK,
            last,
            top,
            top,
            pid,
            pepoch,
            seq,
            count,
        )
    )
    out += record_length
    out += record
    out += sealed
    out += b"\x00"  # no headers
    out += placeholders
    _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def envelope_of(head: Head) -> tuple[int, int] | None:
    """Where record 0's value is in ``head.body`` when the batch is a version 2
    envelope batch (record 0 null key, a version-2 envelope as value, no headers;
    placeholders after it); ``None`` when record 0's value is not a version-2 envelope.
    ``EnvelopeError`` when it is one but the batch around it is not well formed."""
    body = head.body
    size = len(body)
    try:
        length, start = varint(body, 0, size)
        if body[start : start + 4] != b"\x00\x00\x00\x01":  # attrs, ts, offset 0; null key
            return None
        value_size, at = varint(body, start + 4, size)
        if value_size < 4 or body[at : at + 4] != PREFIX:
            return None
        end = at + value_size
        if end + 1 != start + length or body[end] != 0:
            raise EnvelopeError("envelope batch: record 0 is not well formed")
    except (IndexError, BatchError):
        return None
    if size - end - 1 < 6 * (head.count - 1):  # a count its bytes cannot hold
        raise EnvelopeError("envelope batch: fewer placeholders than its record count")
    if body[end + 1 :] != PLACEHOLDERS.of(head.count):
        raise EnvelopeError("envelope batch: records after the envelope are not placeholders")
    return at, end


def key_ref(value: bytes | memoryview) -> tuple[KeyRef, int, int, int]:
    """A version-2 envelope's key reference, codec, base timestamp and where its IV
    starts."""
    if len(value) < 7 or value[:4] != PREFIX:
        raise EnvelopeError("not a version 2 envelope")
    if value[4]:
        raise EnvelopeError(f"envelope flags {value[4]} are not supported in version 2")
    codec = value[5]
    ref, ts_at = unpack_ref(value, 6)
    iv_at = ts_at + _TIMESTAMP.size
    if iv_at + IV_SIZE + TAG_SIZE > len(value):
        raise EnvelopeError("envelope truncated")
    (base_ts,) = _TIMESTAMP.unpack_from(value, ts_at)
    return ref, codec, base_ts, iv_at


def open_(
    head: Head, span: tuple[int, int], decryptor: Callable[[KeyRef], AESGCM], topic: bytes
) -> tuple[bytes, bytes]:
    """The producer's batch back (its header, then its records section), from the
    fetched envelope batch ``head`` whose envelope is at ``span`` of its body.
    ``EnvelopeError`` when it does not decrypt."""
    value = memoryview(head.body)[span[0] : span[1]]
    ref, codec, base_ts, iv_at = key_ref(value)
    if codec & ~COMPRESSION_MASK:
        raise EnvelopeError(f"envelope codec {codec} unknown")
    aead = decryptor(ref)
    cut = iv_at + IV_SIZE
    try:
        plain = aead.decrypt(
            value[iv_at:cut], value[cut:], b"".join((value[:cut], _COUNT.pack(head.count), topic))
        )
    except InvalidTag:
        raise EnvelopeError("authentication tag mismatch (corrupt, or another key)") from None
    fields = HEADER.unpack_from(head.data, 0)
    attrs = (fields[5] & ~COMPRESSION_MASK) | codec
    out = bytearray(
        HEADER.pack(
            fields[0],
            HEADER_SIZE - 12 + len(plain),
            fields[2],
            2,
            0,
            attrs,
            fields[6],
            base_ts,
            *fields[8:],
        )
    )
    crc = crc32c.crc32c(plain, crc32c.crc32c(memoryview(out)[CRC_START:]))
    _CRC.pack_into(out, 17, crc)
    return bytes(out), plain
