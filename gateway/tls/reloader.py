"""Rotation without restarts: the current TLS material, swapped only for good material.

Every new connection asks for ``context`` at accept (or connect) time, so a
swap takes effect for new connections while established ones keep the
session they negotiated. ``reload()`` runs on SIGHUP; ``watch()`` polls the
files' identity (inode, size, mtime) and reloads when one changed. A
replacement that fails validation is logged and ignored: the previous
material stays in use. Callbacks in ``on_reload`` see each new material once it
is in use (the runtime closes connections whose certificate it revokes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path

from .material import Material, MaterialError

log = logging.getLogger("kgw.tls")

Stamp = tuple[tuple[int, int, int] | None, ...]


def stamp(paths: list[Path]) -> Stamp:
    """What identifies the files' current contents, cheaply."""
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class Reloadable:
    """One set of TLS files (a listener's, or the upstream side's) and its current context."""

    def __init__(
        self,
        name: str,
        files: list[Path],
        build: Callable[[], Material],
        watch_interval_s: float,
        customize: Callable[[ssl.SSLContext], None] | None = None,
    ) -> None:
        self.name = name
        self.files = files
        self.watch_interval_s = watch_interval_s
        self._build = build
        self._customize = customize
        self._stamp = stamp(files)
        self.on_reload: list[Callable[[Material], None]] = []
        self.material = self._load()  # MaterialError at start-up stops the gateway
        self.generation = 1
        self._announce("tls_loaded", "TLS material loaded")

    @property
    def context(self) -> ssl.SSLContext:
        return self.material.context

    def _load(self) -> Material:
        material = self._build()
        if self._customize is not None:
            self._customize(material.context)
        return material

    def _announce(self, event: str, text: str) -> None:
        fp = self.material.fingerprint
        log.info(
            "%s%s",
            text,
            f" (certificate sha256 {fp[:16]}…)" if fp else "",
            extra={"event": event, "listener": self.name, "fingerprint": fp},
        )
        for item in self.material.expiring:
            log.warning(
                "expiring soon: %s",
                item,
                extra={"event": "tls_expiring", "listener": self.name, "reason": item},
            )

    def reload(self, trigger: str) -> bool:
        """Load the files again; keep the current material unless the new one is good."""
        self._stamp = stamp(self.files)
        try:
            material = self._load()
        except MaterialError as exc:
            log.error(
                "TLS reload (%s) rejected, previous material stays in use: %s",
                trigger,
                exc,
                extra={
                    "event": "tls_reload_rejected",
                    "listener": self.name,
                    "reason": str(exc),
                },
            )
            return False
        self.material = material
        self.generation += 1
        self._announce("tls_reloaded", f"TLS material reloaded ({trigger})")
        for callback in list(self.on_reload):
            try:
                callback(material)
            except Exception:  # one subscriber's bug must not stop the others or the watch
                log.exception(
                    "TLS reload callback failed",
                    extra={"event": "tls_reload_callback_failed", "listener": self.name},
                )
        return True

    def check(self) -> bool:
        """Reload when a file changed since the last load; True if new material is in use."""
        if stamp(self.files) == self._stamp:
            return False
        return self.reload("file_change")

    async def watch(self, stop: asyncio.Event) -> None:
        if self.watch_interval_s <= 0:
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.watch_interval_s)
            if not stop.is_set():
                self.check()
