"""The credential store in one JSON file, for a single gateway instance.

The file is created 0600 and refused when group or others can read it. Changes
take an exclusive lock on ``<file>.lock``, re-read the file, and replace it
atomically (temporary file, fsync, rename), so a reader never sees half a
file. Readers re-parse only when the file's stat changes; every call runs in a
worker thread, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..fileutil import exclusive_lock, write_atomically
from .store import TABLES, Record, StoreError

FORMAT = 1
_T = TypeVar("_T")
_Data = dict[str, dict[str, Record]]
_Signature = tuple[int, int, int, int]


class FileBackend:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._guard = threading.Lock()
        self._signature: _Signature | None = None
        self._data: _Data = _empty()

    def check(self) -> bool:
        """Read the file now (at start-up), so that a file the gateway cannot use stops
        it instead of failing every login later: ``StoreError`` when it is unreadable,
        readable by group or others, or not a credential file. False: there is no file
        yet (an empty store)."""
        with self._guard:
            self._signature = None
            self._current()
            return self._signature is not None

    async def get(self, table: str, key: str) -> Record | None:
        return await asyncio.to_thread(self._read, lambda data: _copy(data[table].get(key)))

    async def all(self, table: str) -> dict[str, Record]:
        return await asyncio.to_thread(
            self._read, lambda data: {k: dict(v) for k, v in data[table].items()}
        )

    async def insert(self, table: str, key: str, record: Record) -> bool:
        def change(data: _Data) -> bool:
            if key in data[table]:
                return False
            data[table][key] = record
            return True

        return await asyncio.to_thread(self._mutate, change)

    async def put(self, table: str, key: str, record: Record) -> None:
        def change(data: _Data) -> None:
            data[table][key] = record

        await asyncio.to_thread(self._mutate, change)

    async def delete(self, table: str, key: str) -> bool:
        def change(data: _Data) -> bool:
            return data[table].pop(key, None) is not None

        return await asyncio.to_thread(self._mutate, change)

    async def close(self) -> None:
        return None

    # -- reading -----------------------------------------------------------------------

    def _read(self, query: Callable[[_Data], _T]) -> _T:
        with self._guard:
            return query(self._current())

    def _current(self) -> _Data:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._signature, self._data = None, _empty()
            return self._data
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from None
        signature = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
        if signature != self._signature:
            _check_mode(self.path, st)
            self._data = self._parse()
            self._signature = signature
        return self._data

    def _parse(self) -> _Data:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from None
        except ValueError:
            raise StoreError(f"the credential file {self.path} is not valid JSON") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise StoreError(f"the credential file {self.path} is not in format {FORMAT}")
        tables = raw.get("tables", {})
        data = _empty()
        if not isinstance(tables, dict):
            raise StoreError(f"the credential file {self.path} has no tables")
        for name, rows in tables.items():
            if name not in data or not isinstance(rows, dict):
                raise StoreError(f"the credential file {self.path} has a bad table {name!r}")
            data[name] = {str(k): v for k, v in rows.items() if isinstance(v, dict)}
        return data

    # -- writing -----------------------------------------------------------------------

    def _mutate(self, change: Callable[[_Data], _T]) -> _T:
        with self._guard, self._locked():
            self._signature = None  # re-read under the lock: another process may have written
            data = {table: dict(rows) for table, rows in self._current().items()}
            result = change(data)
            self._write(data)
            self._signature = None
            return result

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return exclusive_lock(self.lock_path, StoreError)

    def _write(self, data: _Data) -> None:
        text = json.dumps({"format": FORMAT, "tables": data}, indent=1, sort_keys=True)
        try:
            write_atomically(self.path, text + "\n", mode=0o600)
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc.strerror}") from None


def _empty() -> _Data:
    return {table: {} for table in TABLES}


def _copy(record: Record | None) -> Record | None:
    return None if record is None else dict(record)


def _check_mode(path: Path, st: os.stat_result) -> None:
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise StoreError(
            f"the credential file {path} is accessible by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 it"
        )
