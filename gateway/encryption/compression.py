"""The record-batch compression codecs Kafka uses (attributes bits 0-2), with the
framings Kafka's clients write, so that a batch re-encoded by the gateway is read by
every client. No I/O.

1 gzip (RFC 1952), 2 snappy (xerial framing, as Kafka's Java client writes; raw snappy
is read too, as librdkafka may write it), 3 lz4 (the LZ4 frame format with independent
blocks, KIP-57), 4 zstd (a zstd frame). ``cramjam`` provides snappy, lz4 and zstd.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
LZ4_MAGIC = struct.pack("<I", 0x184D2204)
LZ4_BLOCK = 64 * 1024
LZ4_FLG, LZ4_BD = 0x60, 0x40  # version 01, independent blocks; 64 KiB blocks


MAX_DECOMPRESSED = 64 * 1024 * 1024  # one batch's records, decompressed


class CompressionError(ValueError):
    """Compressed records that cannot be decompressed, or an unknown codec."""


def decompress(codec: int, data: bytes, limit: int | None = None) -> bytes:
    """The records ``data`` holds; ``CompressionError`` when corrupt, or when they would
    exceed ``limit`` bytes (default ``MAX_DECOMPRESSED``): a few compressed bytes may
    stand for gigabytes, and one tenant's batch must not take the gateway's memory."""
    limit = MAX_DECOMPRESSED if limit is None else limit
    try:
        if codec == GZIP:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = inflater.decompress(data, limit + 1)
            if len(out) > limit or inflater.unconsumed_tail:
                raise CompressionError(f"gzip: records exceed {limit} bytes decompressed")
            return out
        if codec == SNAPPY:
            return _snappy_decode(data, limit)
        if codec == LZ4:
            return _bounded(cramjam.lz4.decompress_into, "lz4", data, limit)
        if codec == ZSTD:
            return _bounded(cramjam.zstd.decompress_into, "zstd", data, limit)
    except CompressionError:
        raise
    except Exception as exc:  # the codecs' own errors: corrupt input
        raise CompressionError(
            f"{NAMES[codec]}: cannot decompress ({type(exc).__name__})"
        ) from None
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        return _snappy_encode(data)
    if codec == LZ4:
        return _lz4_frame(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise CompressionError(f"unknown compression codec {codec}")


def _bounded(into: Callable[[bytes, bytearray], int], name: str, data: bytes, limit: int) -> bytes:
    """Decompress into a buffer that grows (x4) up to ``limit``: cramjam refuses to
    write past a buffer's end, so a bomb stops at ``limit`` bytes."""
    size = min(limit, max(64 * 1024, 8 * len(data)))
    while True:
        buffer = bytearray(size)
        try:
            written = into(data, buffer)
        except Exception:  # corrupt, or more than the buffer holds
            if size >= limit:
                raise CompressionError(
                    f"{name}: cannot decompress (corrupt, or over {limit} bytes)"
                ) from None
            size = min(limit, size * 4)
            continue
        return bytes(memoryview(buffer)[:written])


def _snappy_decode(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, limit)
    pos = 16
    out = bytearray()
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("snappy: truncated xerial block")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError("snappy: xerial block runs past the end")
        out += _snappy_block(data[pos : pos + size], limit - len(out))
        pos += size
    return bytes(out)


def _snappy_block(block: bytes, limit: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(block) > limit:  # a raw block states its size
        raise CompressionError("snappy: records exceed the decompressed size limit")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_encode(data: bytes) -> bytes:
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(data), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 for the few bytes of an LZ4 frame descriptor (inputs under 16 bytes)."""
    p1, p2, p3, p5 = 2654435761, 2246822519, 3266489917, 374761393
    mask = 0xFFFFFFFF
    h = (seed + p5 + len(data)) & mask
    for byte in data:
        h = (h + byte * p5) & mask
        h = (((h << 11) | (h >> 21)) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    return h ^ (h >> 16)


LZ4_HEADER = LZ4_MAGIC + bytes([LZ4_FLG, LZ4_BD, (_xxh32(bytes([LZ4_FLG, LZ4_BD])) >> 8) & 0xFF])


def _lz4_frame(data: bytes) -> bytes:
    out = bytearray(LZ4_HEADER)
    for start in range(0, len(data), LZ4_BLOCK):
        chunk = data[start : start + LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # incompressible: stored as is, high bit set
            out += struct.pack("<I", len(chunk) | 0x80000000)
            out += chunk
        else:
            out += struct.pack("<I", len(block))
            out += block
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)
