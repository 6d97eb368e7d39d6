"""The audit trail file: appends under a lock, reads, verifies.

The trail is a JSON-lines file opened only for appending; beside it
``<file>.head`` records the last entry's sequence number and hash (with a MAC),
so cutting entries off the end is caught too. With a key (``load_key``, from a
file kept outside the repository, mode 0600) every hash is an HMAC: someone who
can write the file but has no key cannot forge a consistent trail. Without a key
the chain still catches every edit, deletion, insertion and move, but a full
rewrite can only be caught against a head hash kept elsewhere
(``kgw audit head``, ``verify --expect-head``).
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .chain import GENESIS, Head, Problem, Report, head_mac, parse_line, seal, verify

KEY_ENV = "KGW_AUDIT_KEY_FILE"
MIN_KEY_BYTES = 16
_HEX = re.compile(r"^[0-9a-fA-F]+$")


class AuditError(Exception):
    """The trail cannot be used as asked; the message says why (never the key)."""


def rfc3339(at: float) -> str:
    moment = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def load_key(path: Path | str) -> bytes:
    """The HMAC key in ``path``: hex or raw, at least 16 bytes, not readable by others."""
    path = Path(path)
    try:
        info = path.stat()
        data = path.read_bytes()
    except OSError as exc:
        raise AuditError(f"cannot read the audit key file {path}: {exc.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuditError(f"{path}: the audit key file must not be readable by others (chmod 600)")
    text = data.strip()
    key = bytes.fromhex(text.decode()) if text and _HEX.match(text.decode("latin-1")) else text
    if len(key) < MIN_KEY_BYTES:
        raise AuditError(f"{path}: the audit key must be at least {MIN_KEY_BYTES} bytes")
    return key


def write_new_key(path: Path | str) -> None:
    """A new random 32-byte key, hex, mode 0600; refuses to overwrite an existing file."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise AuditError(f"{path} exists; refusing to overwrite a key") from None
    except OSError as exc:
        raise AuditError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")


class AuditTrail:
    """Append-only, hash-chained JSON-lines audit log. Safe across threads and processes."""

    def __init__(
        self,
        path: Path | str,
        *,
        key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_name(self.path.name + ".head")
        self._key = key
        self._clock = clock
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str, key_file: Path | str | None = None) -> AuditTrail:
        """A trail keyed from ``key_file`` (or ``$KGW_AUDIT_KEY_FILE``), unkeyed without one."""
        key_file = key_file or os.environ.get(KEY_ENV) or None
        return cls(path, key=load_key(key_file) if key_file else None)

    @property
    def keyed(self) -> bool:
        return self._key is not None

    def append(
        self,
        actor: str,
        action: str,
        target: str,
        before: Any = None,
        after: Any = None,
        *,
        at: float | None = None,
    ) -> dict[str, Any]:
        """Append one entry and return it. ``before``/``after`` are JSON values."""
        if not actor or not action:
            raise AuditError("an audit entry needs an actor and an action")
        ts = rfc3339(self._clock() if at is None else at)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o640)
            with os.fdopen(fd, "r+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    seq, prev = self._last(handle)
                    entry = seal(seq + 1, ts, actor, action, target, before, after, prev, self._key)
                    handle.write(json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n")
                    handle.flush()
                    os.fsync(handle.fileno())
                    self._write_head(Head(entry["seq"], entry["hash"]))
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        return entry

    def check_appendable(self) -> None:
        """``AuditError`` now if ``append`` would fail (so a change can be refused first)."""
        if not self.path.exists():
            parent = self.path.parent
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            if not os.access(parent, os.W_OK | os.X_OK):
                raise AuditError(f"{self.path}: cannot create the audit trail in {parent}")
            return
        if not os.access(self.path, os.R_OK | os.W_OK):
            raise AuditError(f"{self.path}: the audit trail is not readable and writable")
        with open(self.path, "rb") as handle:
            self._last(handle)

    def _last(self, handle: IO[bytes]) -> tuple[int, str]:
        """The last entry's seq and hash; refuses to extend a damaged tail."""
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0, GENESIS
        chunk = min(size, 1 << 16)
        while True:
            handle.seek(size - chunk)
            data = handle.read(chunk)
            if not data.endswith(b"\n"):
                raise AuditError(f"{self.path}: the last line is incomplete; run kgw audit verify")
            cut = data.rfind(b"\n", 0, len(data) - 1)
            if cut >= 0 or chunk == size:
                break
            chunk = min(size, chunk * 4)
        parsed = parse_line(data[cut + 1 :].decode("utf-8", "replace"))
        if isinstance(parsed, str):
            raise AuditError(f"{self.path}: the last entry is damaged ({parsed}); run verify")
        return int(parsed["seq"]), str(parsed["hash"])

    def _write_head(self, head: Head) -> None:
        mac = head_mac(head.seq, head.hash, self._key)
        record = {"seq": head.seq, "hash": head.hash, "mac": mac}
        temp = self.head_path.with_name(f".{self.head_path.name}.{os.getpid()}.tmp")
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.head_path)

    # -- reading ---------------------------------------------------------------

    def head(self) -> Head | None:
        """What the head file records, or ``None`` when there is none (or it is unreadable)."""
        try:
            record = json.loads(self.head_path.read_text(encoding="utf-8"))
            return Head(int(record["seq"]), str(record["hash"]), str(record["mac"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return Head(-1, "", "")  # present but damaged: fails verification

    def lines(self) -> Iterator[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace", newline="\n") as handle:
                for line in handle:
                    yield line.rstrip("\n")
        except FileNotFoundError:
            raise AuditError(f"{self.path}: no such audit trail") from None

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every well-formed entry in file order (``verify`` says whether to trust them)."""
        for line in self.lines():
            parsed = parse_line(line)
            if not isinstance(parsed, str):
                yield parsed

    def verify(self, expect_head: str | None = None, *, require_head: bool = True) -> Report:
        """Check the trail; without its head file (and ``require_head``) that is a problem too."""
        head = self.head()
        report = verify(self.lines(), self._key, head, expect_head)
        if head is None and require_head and report.entries:
            report.problems.append(
                Problem(
                    0,
                    None,
                    "truncated",
                    f"{self.head_path.name} is missing: entries cut off the end would go unseen",
                )
            )
        return report
