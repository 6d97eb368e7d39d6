"""The default sink: JSON lines in rotating files of bounded size and count.

``path`` is the file being written; ``path.1`` … ``path.<max_files-1>`` are older
ones (``.1`` the newest). A file is rotated before a line would take it past
``max_bytes`` and a line is never split, so the files never hold more than
``max_files * max_bytes`` bytes together. A single line longer than ``max_bytes``
cannot be kept within the bound: it is counted (``too_large``), not written.

The class is synchronous on purpose: ``FileSink`` runs it on its own thread, so
a slow or stalled disk holds up that thread, never the event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from .pending import Queued, entry_of
from .sink import Drops, SinkError

FILE_MODE = 0o640  # records name principals and client addresses


# The reference: ``json.dumps(entry, separators=(",", ":"), ensure_ascii=False,
# default=str)``, built once (stateless between calls; safe on several threads).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
# orjson writes the same bytes ~10x faster for what records hold (decision 0048);
# datetimes, dataclasses and str/int subclasses go to ``default`` (str) as in the
# reference, and what orjson refuses (non-str keys, lone surrogates, ints beyond 64
# bits, deep nesting) is encoded by the reference instead.
_FAST_OPTIONS = (
    orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def encode_line(item: Queued) -> bytes:
    """One record (or ``PendingRequest``) as a compact JSON line (``default=str`` for
    stray non-JSON values).

    The bytes of the reference encoder, except that NaN and ±Infinity (which no record
    holds, and which JSON has no spelling for) are written as ``null``."""
    entry = entry_of(item)
    try:
        return orjson.dumps(entry, default=str, option=_FAST_OPTIONS)
    except orjson.JSONEncodeError:
        return _ENCODER.encode(entry).encode("utf-8", "replace") + b"\n"


class RotatingFile:
    """Appends lines to ``path``, rotating within ``max_bytes`` * ``max_files``."""

    def __init__(self, path: Path, max_bytes: int, max_files: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._fd: int | None = None
        self._size = 0

    def files(self) -> list[Path]:
        """The files that exist now, newest first."""
        names = [self.path] + [self._rotated(i) for i in range(1, self.max_files)]
        return [p for p in names if p.exists()]

    def _rotated(self, index: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{index}")

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remove_extra()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def _remove_extra(self) -> None:
        """Older files beyond ``max_files`` (left by a larger setting) go."""
        pattern = re.compile(re.escape(self.path.name) + r"\.(\d+)")
        for candidate in self.path.parent.iterdir():
            match = pattern.fullmatch(candidate.name)
            if match and int(match.group(1)) >= self.max_files:
                candidate.unlink(missing_ok=True)

    def rotate(self) -> None:
        self.close()
        if self.max_files == 1:
            self.path.unlink(missing_ok=True)
            return
        for index in range(self.max_files - 1, 1, -1):
            older = self._rotated(index - 1)
            if older.exists():
                os.replace(older, self._rotated(index))
        if self.path.exists():
            os.replace(self.path, self._rotated(1))

    def write_lines(self, lines: list[bytes]) -> Drops:
        """Write ``lines`` in order; returns what could not be kept within the bounds.

        Raises ``SinkError`` (with how many lines were written first) on an OS error.
        """
        drops: Drops = {}
        chunk: list[bytes] = []
        chunk_size = 0
        written = 0
        for line in lines:
            size = len(line)
            if size > self.max_bytes:
                written = self._flush(chunk, written) + 1
                chunk, chunk_size = [], 0
                drops["too_large"] = drops.get("too_large", 0) + 1
                continue
            if self._fd is None:
                self._open_or_fail(written)
            if self._size + chunk_size + size > self.max_bytes:
                written = self._flush(chunk, written)
                chunk, chunk_size = [], 0
                self._rotate_or_fail(written)
            chunk.append(line)
            chunk_size += size
        self._flush(chunk, written)
        return drops

    def _open_or_fail(self, written: int) -> None:
        try:
            self._open()
        except OSError as exc:
            raise SinkError(f"cannot open {self.path}: {exc.strerror}", written) from None

    def _rotate_or_fail(self, written: int) -> None:
        try:
            self.rotate()
            self._open()
        except OSError as exc:
            raise SinkError(f"cannot rotate {self.path}: {exc.strerror}", written) from None

    def _flush(self, chunk: list[bytes], written: int) -> int:
        if not chunk:
            return written
        data = b"".join(chunk)
        try:
            fd = self._open()
            view = memoryview(data)
            while view:
                done = os.write(fd, view)
                self._size += done
                view = view[done:]
        except OSError as exc:
            self.close()  # reopen (and re-read the size) on the next write
            raise SinkError(f"cannot write {self.path}: {exc.strerror}", written) from None
        return written + len(chunk)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class FileSink:
    """``RotatingFile`` on a thread of its own: encoding and writing leave the event loop."""

    name = "file"

    def __init__(self, path: Path, max_bytes: int, max_files: int) -> None:
        self.file = RotatingFile(path, max_bytes, max_files)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgw-accesslog")

    def _write(self, entries: list[Queued]) -> Drops:
        return self.file.write_lines([encode_line(entry) for entry in entries])

    async def write(self, entries: list[Queued]) -> Drops:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._write, entries)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._thread, self.file.close)
        finally:
            self._thread.shutdown(wait=False, cancel_futures=True)
