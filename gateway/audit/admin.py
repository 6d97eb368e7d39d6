"""The audit trail for the admin commands (``kgw policy|apikey|scram|quota|certs``).

Which trail a command writes to, first match wins:

1. ``--audit-trail PATH``;
2. the ``audit.trail`` of the gateway configuration given with ``--config``;
3. ``$KGW_AUDIT_TRAIL``.

The key: ``--audit-key-file``, else the configuration's ``audit.key_file`` when it
has an ``audit`` section (null: unkeyed; the environment is not consulted, so the
CLI writes what the gateway writes), else ``$KGW_AUDIT_KEY_FILE``.

A ``ChangeRecorder`` is handed to the stores' hooks. Before a change it checks
that the trail can be appended to (``preflight``), so a broken trail refuses the
change instead of letting it through unrecorded; after, ``finish`` reports what
happened: an append that failed anyway makes the command fail (exit 1), and a
change made with no trail configured is allowed but said so on stderr
(docs/decisions/0017-admin-changes-audited-by-default.md).
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .trail import KEY_ENV, AuditError, AuditTrail, load_key

if TYPE_CHECKING:
    from ..config import GatewayConfig

TRAIL_ENV = "KGW_AUDIT_TRAIL"
log = logging.getLogger("kgw.audit")


def add_audit_args(parser: argparse.ArgumentParser, *, actor: bool = False) -> None:
    """``--audit-trail``, ``--audit-key-file`` (and ``--actor``) on a command that changes state."""
    parser.add_argument(
        "--audit-trail",
        type=Path,
        help=f"record the change here (default: the --config's audit.trail, else ${TRAIL_ENV})",
    )
    parser.add_argument(
        "--audit-key-file",
        type=Path,
        help=f"HMAC key of the trail (default: the --config's audit.key_file, else ${KEY_ENV})",
    )
    if actor:
        parser.add_argument("--actor", help="who makes the change (default: cli:<login>)")


def cli_actor(args: argparse.Namespace) -> str:
    """``--actor``, else ``cli:<OS login>``."""
    given = getattr(args, "actor", None)
    if given:
        return str(given)
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


def resolve_trail(args: argparse.Namespace, config: GatewayConfig | None) -> AuditTrail | None:
    """The trail this command writes to (see the module docstring), or ``None``."""
    section = config.audit if config is not None else None
    path: Path | None = getattr(args, "audit_trail", None)
    if path is None and section is not None:
        path = section.trail
    if path is None and os.environ.get(TRAIL_ENV):
        path = Path(os.environ[TRAIL_ENV])
    if path is None:
        return None
    key_file: Path | None = getattr(args, "audit_key_file", None)
    if key_file is None:
        if section is not None:
            key_file = section.key_file
        elif os.environ.get(KEY_ENV):
            key_file = Path(os.environ[KEY_ENV])
    return AuditTrail(path, key=load_key(key_file) if key_file is not None else None)


class ChangeRecorder:
    """Collects the changes a command makes into the trail (or counts them, without one)."""

    def __init__(self, trail: AuditTrail | None) -> None:
        self.trail = trail
        self.recorded = 0
        self.unrecorded = 0
        self.failures: list[str] = []

    @classmethod
    def for_command(
        cls, args: argparse.Namespace, config: GatewayConfig | None = None
    ) -> ChangeRecorder:
        """The recorder for ``args``; ``AuditError`` if the trail cannot take an entry."""
        recorder = cls(resolve_trail(args, config))
        recorder.preflight()
        return recorder

    def preflight(self) -> None:
        if self.trail is not None:
            self.trail.check_appendable()

    def append(
        self,
        actor: str,
        action: str,
        target: str,
        before: Any = None,
        after: Any = None,
        *,
        at: float | None = None,
    ) -> None:
        if self.trail is None:
            self.unrecorded += 1
            return
        try:
            self.trail.append(actor, action, target, before, after, at=at)
        except (AuditError, OSError, ValueError) as exc:
            self.failures.append(f"{action} on {target}: {exc}")
            log.error(
                "admin change not recorded in the audit trail",
                extra={"event": "audit_append_failed", "reason": action, "path": str(target)},
            )
            return
        self.recorded += 1

    def finish(self, code: int) -> int:
        """Say what was not recorded; the exit code (1 when an append failed)."""
        if self.failures:
            assert self.trail is not None
            for failure in self.failures:
                print(
                    f"kgw: ERROR: the change was made but NOT recorded in {self.trail.path}: "
                    f"{failure}",
                    file=sys.stderr,
                )
            return code or 1
        if self.unrecorded:
            print(
                f"kgw: warning: {self.unrecorded} change(s) not recorded in an audit trail "
                f"(give --audit-trail, set ${TRAIL_ENV}, or an audit section in --config)",
                file=sys.stderr,
            )
            log.warning(
                "admin change without an audit trail",
                extra={"event": "audit_off"},
            )
        return code
