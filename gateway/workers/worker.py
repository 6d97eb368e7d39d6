"""What a worker process does besides being a gateway: tell the supervisor it is up,
tag its log lines, and not outlive the supervisor.

The worker writes ``worker-<slot>.json`` (its pid and private metrics port) into the
directory the supervisor gave it once its listeners are open; the supervisor reads it
(``read_status``) and counts the worker as started.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class WorkerRole:
    """This process is worker ``slot`` of a supervisor that watches ``directory``."""

    slot: int
    directory: Path


@dataclass(frozen=True, slots=True)
class Status:
    pid: int
    metrics_port: int | None


def status_path(directory: Path, slot: int) -> Path:
    return directory / f"worker-{slot}.json"


def announce(role: WorkerRole, metrics_port: int | None) -> None:
    """Listening: write the status file atomically (write, then rename)."""
    final = status_path(role.directory, role.slot)
    temporary = final.with_suffix(".tmp")
    temporary.write_text(json.dumps({"pid": os.getpid(), "metrics_port": metrics_port}))
    temporary.replace(final)


def read_status(directory: Path, slot: int) -> Status | None:
    """The slot's status file, or None when it is absent or unreadable (not written yet)."""
    try:
        data = json.loads(status_path(directory, slot).read_text())
        port = data.get("metrics_port")
        return Status(int(data["pid"]), int(port) if port is not None else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _WorkerTag(logging.Filter):
    def __init__(self, slot: int) -> None:
        super().__init__()
        self.slot = slot

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.slot
        return True


def tag_logs(slot: int) -> None:
    """Every log line of this process carries ``"worker": slot``."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(_WorkerTag(slot))


def die_with_parent() -> None:
    """Linux: SIGTERM (drain) when the supervisor dies, so no orphan keeps the ports."""
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
