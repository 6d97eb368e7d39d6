"""Encrypting a Produce partition's records and decrypting a Fetch partition's. No I/O
beyond the key manager calls the DEK cache makes on a miss.

Granularity ``batch`` (``batchenv``, wire format 2): each batch becomes one envelope
record and placeholders, one DEK use per batch; on Fetch such a batch is recognised by
its record 0 and replaced by the producer's batch. Granularity ``record`` (format 1):
encryption re-encodes every v2 batch with each record's value replaced by its envelope
(and key/headers moved inside, per the rule); everything else of the batch is kept:
offsets, timestamps, producer id/epoch/sequence, transactional and control bits, the
compression codec. Decryption re-encodes only the batches that hold envelopes; other
batches (written before encryption, other magics) are passed on byte for byte, and a
last batch the fetch size limit cut short is dropped (the client fetches it again
from its offset), so a partial ciphertext batch never reaches a client.
"""

from __future__ import annotations

import struct

from . import batchenv, envelope
from .batch import CONTROL, HEADER_SIZE, Batch, BatchError, Raw, Record, encode, parse, split
from .compression import CompressionError
from .deks import DekCache
from .envelope import MAGIC, EnvelopeError
from .fastpath import Head, open_batch, seal_batch
from .policy import Rule


class RecordsError(ValueError):
    """A partition's records cannot be encrypted or decrypted (the reason says why)."""


def encrypt_records(blob: bytes, topic: str, rule: Rule, deks: DekCache) -> bytes:
    if rule.batch:  # one envelope per batch (format 2, ``batchenv``): one DEK use each
        heads = [_head(piece) for piece in _split(blob)]
        name = topic.encode("utf-8")
        made = deks.made
        sealed_batches = []
        for head in heads:
            ref, aead = deks.encryptor(rule.kek, 1, deks.made > made)
            try:
                sealed_batches.append(batchenv.seal(head, aead, ref, name))
            except (EnvelopeError, BatchError) as exc:
                raise RecordsError(f"cannot seal: {exc}") from None
        return b"".join(sealed_batches)
    if not rule.key and not rule.headers:  # values only: the fast path (``fastpath``)
        heads = [_head(piece) for piece in _split(blob)]
        if all(h.count <= deks.config.max_uses for h in heads):
            name = topic.encode("utf-8")
            sealed_batches = []
            made = deks.made
            for head in heads:
                ref, aead = deks.encryptor(rule.kek, head.count, deks.made > made)
                try:
                    sealed_batches.append(seal_batch(head, aead, ref, name))
                except EnvelopeError as exc:  # a KEK name too long
                    raise RecordsError(f"cannot seal: {exc}") from None
            return b"".join(sealed_batches)
    batches = _client_batches(blob)
    out = []
    step = deks.config.max_uses  # a batch larger than a DEK's uses spans several DEKs
    made = deks.made
    for batch in batches:
        sealed: list[Record] = []
        for start in range(0, len(batch.records), step):
            chunk = batch.records[start : start + step]
            ref, aead = deks.encryptor(rule.kek, len(chunk), deks.made > made)
            try:
                sealed.extend(_seal(aead, ref, topic, rule, r) for r in chunk)
            except (EnvelopeError, struct.error) as exc:  # a KEK name or header too long
                raise RecordsError(f"cannot seal: {exc}") from None
        batch.records = sealed
        out.append(encode(batch))
    return b"".join(out)


def _like_envelope(value: bytes | None) -> bool:
    """A value a fetch could take for an envelope: ``KGE`` and a version byte, even with
    nothing after it (a version-2 batch envelope's prefix alone is read as one)."""
    return value is not None and len(value) >= 4 and value[:3] == MAGIC


def refuse_envelopes(blob: bytes) -> None:
    """Records written in clear to a topic some policy encrypts (by a tenant no policy
    covers there): refused (``RecordsError``) if a value looks like an envelope, which
    every consumer's fetch would try to decrypt and fail on."""
    heads = [_head(piece) for piece in _split(blob)]
    if not any(MAGIC in head.body for head in heads):
        return
    for batch in _client_batches(blob):
        if any(_like_envelope(r.value) for r in batch.records):
            raise RecordsError("a value written in clear starts like an encryption envelope (KGE)")


def _head(piece: bytes | Raw) -> Head:
    """A Produce partition's whole v2 batch, header checked (as ``_client_batches``)."""
    if isinstance(piece, Raw):
        raise RecordsError("only complete record batches of magic 2 can be encrypted")
    try:
        head = Head(piece)
    except (BatchError, CompressionError) as exc:
        raise RecordsError(str(exc)) from None
    if head.attributes & CONTROL:
        raise RecordsError("a client may not write control batches")
    return head


def _client_batches(blob: bytes) -> list[Batch]:
    """The whole v2 batches of a Produce partition; anything else is refused: other
    magics, a truncated tail, and control batches (only the transaction coordinator
    writes those; passed on, their records would reach the broker in clear)."""
    batches: list[Batch] = []
    for piece in _split(blob):
        if isinstance(piece, Raw):
            raise RecordsError("only complete record batches of magic 2 can be encrypted")
        batch = _parse(piece)
        if batch.is_control:
            raise RecordsError("a client may not write control batches")
        batches.append(batch)
    return batches


def _seal(aead: object, ref: envelope.KeyRef, topic: str, rule: Rule, record: Record) -> Record:
    if record.value is None:  # a tombstone stays one (compaction needs it)
        return record
    sealed = envelope.seal(
        aead,  # type: ignore[arg-type]
        ref,
        topic,
        record.value,
        key=record.key if rule.key else None,
        headers=record.headers if rule.headers else None,
    )
    return Record(
        record.offset_delta,
        record.timestamp_delta,
        None if rule.key and record.key is not None else record.key,
        sealed,
        () if rule.headers else record.headers,
        record.attributes,
    )


def decrypt_records(blob: bytes, topic: str, deks: DekCache) -> bytes:
    pieces = _split(blob)
    name = topic.encode("utf-8")
    out: list[bytes] = []
    for index, piece in enumerate(pieces):
        if isinstance(piece, Raw):
            if piece.truncated and index > 0:
                break  # a partial last batch: dropped, fetched again whole
            out.append(piece.data)
            continue
        if len(piece) > HEADER_SIZE and MAGIC not in piece and not piece[22] & 0x07:
            # uncompressed, no envelope: as it is
            out.append(piece)
            continue
        try:
            head = Head(piece)
            if MAGIC not in head.body:  # no envelope can be in it
                out.append(piece)
                continue
            span = batchenv.envelope_of(head)
            if span is not None:  # a whole batch in one envelope (format 2)
                out.extend(batchenv.open_(head, span, deks.decryptor, name))
                continue
            opened = open_batch(head, deks.decryptor, name)
        except (BatchError, CompressionError, EnvelopeError) as exc:
            raise RecordsError(str(exc)) from None
        if opened is not None:
            out.append(opened)
            continue
        batch = _parse(piece)  # envelopes with key or headers inside: the general path
        if not any(envelope.is_envelope(r.value) for r in batch.records):
            out.append(piece)
            continue
        batch.records = [_open(deks, topic, r) for r in batch.records]
        out.append(encode(batch))
    return b"".join(out)


def _open(deks: DekCache, topic: str, record: Record) -> Record:
    value = record.value
    if value is None or not envelope.is_envelope(value):
        return record
    try:
        ref, flags, iv_at = envelope.key_ref(value)
        aead = deks.decryptor(ref)
        opened = envelope.open_(aead, value, iv_at, flags, topic)
    except EnvelopeError as exc:
        raise RecordsError(str(exc)) from None
    return Record(
        record.offset_delta,
        record.timestamp_delta,
        opened.key if flags & envelope.KEY_INSIDE else record.key,
        opened.value,
        opened.headers if flags & envelope.HEADERS_INSIDE else record.headers,
        record.attributes,
    )


def _split(blob: bytes) -> list[bytes | Raw]:
    try:
        return split(blob)
    except BatchError as exc:
        raise RecordsError(str(exc)) from None


def _parse(data: bytes) -> Batch:
    try:
        return parse(data)
    except (BatchError, CompressionError) as exc:
        raise RecordsError(str(exc)) from None
