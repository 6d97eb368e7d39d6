"""Kafka record batches (magic v2) as values: parse a ``records`` blob into batches and
their records, and encode them back with a correct CRC-32C. No I/O.

Layout (Kafka's ``DefaultRecordBatch``): baseOffset i64, batchLength i32,
partitionLeaderEpoch i32, magic i8, crc u32 (CRC-32C of everything after it),
attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId
i64, producerEpoch i16, baseSequence i32, recordsCount i32, then the records
(compressed as a whole when attributes say so). A record: length varint, attributes
i8, timestampDelta varlong, offsetDelta varint, key, value (varint length, -1: null),
headers (varint count, each key and value by varint length).

Only what a batch carries is kept: encoding a parsed batch with its records untouched
gives the same bytes, except that the records are compressed again (same codec).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import crc32c

from .compression import compress, decompress

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
CRC_START = 21  # offset of attributes: the CRC covers attributes .. end
COMPRESSION_MASK = 0x07
TRANSACTIONAL = 0x10
CONTROL = 0x20


class BatchError(ValueError):
    """The bytes are not a well-formed v2 record batch (the reason says where)."""


@dataclass(frozen=True, slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


@dataclass(slots=True)
class Batch:
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record] = field(default_factory=list)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)


@dataclass(frozen=True, slots=True)
class Raw:
    """Bytes passed on as they are: a batch of another magic, or a truncated tail."""

    data: bytes
    truncated: bool = False


def split(blob: bytes) -> list[bytes | Raw]:
    """Cut a ``records`` blob into whole v2 batches (``bytes``) and ``Raw`` pieces: a
    batch of magic 0/1 (whole), or a last batch cut short by the fetch size limit."""
    out: list[bytes | Raw] = []
    view = memoryview(blob)
    pos = 0
    end = len(blob)
    while pos < end:
        if end - pos < 17:
            out.append(Raw(bytes(view[pos:]), truncated=True))
            break
        (length,) = struct.unpack_from(">i", view, pos + 8)
        if length < 0:
            raise BatchError(f"negative batch length at {pos}")
        size = 12 + length
        if pos + size > end:
            out.append(Raw(bytes(view[pos:]), truncated=True))
            break
        magic = view[pos + 16]
        piece = bytes(view[pos : pos + size])
        out.append(piece if magic == 2 else Raw(piece))
        pos += size
    return out


def checked(data: bytes) -> tuple[tuple[Any, ...], bytes]:
    """A whole v2 batch's header fields (magic, length and CRC-32C checked) and its
    records' bytes, decompressed."""
    if len(data) < HEADER_SIZE:
        raise BatchError("batch shorter than its header")
    fields = HEADER.unpack_from(data, 0)
    length, magic, crc, attrs = fields[1], fields[3], fields[4], fields[5]
    if magic != 2:
        raise BatchError(f"magic {magic}, not 2")
    if length + 12 != len(data):
        raise BatchError("batch length does not match its bytes")
    if crc32c.crc32c(memoryview(data)[CRC_START:]) != crc:
        raise BatchError("CRC-32C mismatch")
    body = data[HEADER_SIZE:]
    codec = attrs & COMPRESSION_MASK
    if codec:
        body = decompress(codec, body)
    return fields, body


def parse(data: bytes) -> Batch:
    """One whole v2 batch (CRC checked), records decompressed and parsed."""
    fields, body = checked(data)
    (base, _, epoch, _, _, attrs, last, base_ts, max_ts, pid, pepoch, seq, count) = fields
    batch = Batch(base, epoch, attrs, last, base_ts, max_ts, pid, pepoch, seq)
    reader = _Reader(body)
    for _ in range(count):
        batch.records.append(reader.record())
    if reader.pos != len(body):
        raise BatchError("bytes left after the last record")
    return batch


def encode(batch: Batch) -> bytes:
    """The batch's bytes: records encoded and compressed with its codec, CRC-32C set."""
    body = b"".join(_record(r) for r in batch.records)
    if batch.compression:
        body = compress(batch.compression, body)
    head = HEADER.pack(
        batch.base_offset,
        HEADER_SIZE - 12 + len(body),
        batch.partition_leader_epoch,
        2,
        0,
        batch.attributes,
        batch.last_offset_delta,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        len(batch.records),
    )
    out = bytearray(head)
    out += body
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# -- varints (zig-zag, as Kafka's ByteUtils) -------------------------------------------


def write_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _bytes_field(value: bytes | None, out: bytearray) -> None:
    if value is None:
        write_varint(-1, out)
    else:
        write_varint(len(value), out)
        out += value


def _record(record: Record) -> bytes:
    body = bytearray()
    body.append(record.attributes & 0xFF)
    write_varint(record.timestamp_delta, body)
    write_varint(record.offset_delta, body)
    _bytes_field(record.key, body)
    _bytes_field(record.value, body)
    write_varint(len(record.headers), body)
    for name, value in record.headers:
        encoded = name.encode("utf-8")
        write_varint(len(encoded), body)
        body += encoded
        _bytes_field(value, body)
    out = bytearray()
    write_varint(len(body), out)
    out += body
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        shift = 0
        result = 0
        data = self.data
        while True:
            if self.pos >= len(data):
                raise BatchError("varint runs past the end")
            byte = data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise BatchError("varint too long")
        return (result >> 1) ^ -(result & 1)

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise BatchError("field runs past the end")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def nullable(self) -> bytes | None:
        size = self.varint()
        return None if size == -1 else self.take(size)

    def record(self) -> Record:
        length = self.varint()
        end = self.pos + length
        if length < 0 or end > len(self.data):
            raise BatchError("record runs past the end")
        attributes = self.take(1)[0]
        ts_delta = self.varint()
        off_delta = self.varint()
        key = self.nullable()
        value = self.nullable()
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(self.varint()):
            name = self.take(self.varint())
            try:
                text = name.decode("utf-8")
            except UnicodeDecodeError:
                raise BatchError("header key is not UTF-8") from None
            headers.append((text, self.nullable()))
        if self.pos != end:
            raise BatchError("record length does not match its fields")
        return Record(off_delta, ts_delta, key, value, tuple(headers), attributes)
