"""Files watched for edits on a thread of their own, waking the event loop only on a change.

The policy and tenant watchers must see an edit within a fraction of a second, and
used to hop to a worker thread every 0.25 s to stat their files: three or four
wake-ups of the process per tick, ~3 ms of CPU per second each for an idle gateway
(decision 0048). ``FilePoller`` stats the files on its own daemon thread (a hung
network file system stalls that thread, never the event loop) and wakes the loop only
when a file's signature changed, or while a file is young enough (``racy_s``) that a
second edit could hide behind an unchanged signature (the readers re-read such files
too). What the watcher does on a notice, and how often the files are looked at, are
unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

Signature = tuple[int, int, int, int, int] | str
"""A file's (mtime_ns, size, inode, device, mode), or why it could not be stat'ed (a
chmod is a change: the stores refuse files others may read)."""


def signature(path: Path) -> Signature:
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{type(exc).__name__}:{exc.errno}"
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev, st.st_mode)


class FilePoller:
    """Stats ``paths`` every ``interval_s`` on a thread; ``wait`` returns on a change.

    ``start`` from the event loop that will ``wait``; ``close`` stops the thread (it
    exits within one interval)."""

    def __init__(self, paths: Sequence[Path], interval_s: float, racy_s: float = 2.0) -> None:
        self.paths = tuple(paths)
        self.interval_s = interval_s
        self.racy_s = racy_s
        self.notices = 0  # how many times the loop was woken (tests, diagnostics)
        self._stop = threading.Event()
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        # the baseline before the caller's first read: an edit after it is always seen
        baseline = self._signatures()
        self._thread = threading.Thread(
            target=self._run,
            args=(baseline,),
            name=f"kgw-filewatch-{self.paths[0].name}",
            daemon=True,
        )
        self._thread.start()

    async def wait(self, within_s: float) -> bool:
        """Until a file changed (True) or ``within_s`` seconds passed (False)."""
        changed = self._changed
        assert changed is not None, "FilePoller.start() first"
        if not changed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), within_s)
        seen = changed.is_set()
        changed.clear()
        return seen

    def close(self) -> None:
        self._stop.set()

    # -- the thread -----------------------------------------------------------------

    def _signatures(self) -> tuple[Signature, ...]:
        return tuple(signature(path) for path in self.paths)

    def _young(self, signatures: tuple[Signature, ...]) -> bool:
        now_ns = time.time_ns()
        racy_ns = int(self.racy_s * 1e9)
        return any(not isinstance(s, str) and now_ns - s[0] < racy_ns for s in signatures)

    def _run(self, last: tuple[Signature, ...]) -> None:
        while not self._stop.wait(self.interval_s):
            current = self._signatures()
            if current != last or self._young(current):
                last = current
                self._notify()

    def _notify(self) -> None:
        loop, changed = self._loop, self._changed
        if loop is None or changed is None:
            return
        try:
            loop.call_soon_threadsafe(changed.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            self._stop.set()
            return
        self.notices += 1
