"""Files that several processes change: an exclusive lock, and whole-file writes that
readers see as the old or the new content, never a mix."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync, rename over ``path``.

    ``mode`` sets the permission bits (use 0o600 for files holding secrets); without
    it an existing file keeps its bits and a new one gets 0644. Raises ``OSError``.
    """
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # not every file system lets a directory be synced
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, error: type[Exception] = OSError) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created 0600, with its directory)
    for the block: one writer at a time across processes. A lock that cannot be taken
    raises ``error("cannot lock <path>: <reason>")`` (``OSError`` itself by default)."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if error is OSError:
            raise
        raise error(f"cannot lock {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def cache_root(cache_dir: Path | None = None) -> Path:
    """The kgw cache root: ``cache_dir``, else ``$KGW_CACHE_DIR``, else ``~/.cache/kgw``."""
    if cache_dir is not None:
        return cache_dir.expanduser()
    env = os.environ.get("KGW_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "kgw"
