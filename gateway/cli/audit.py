"""``kgw audit verify|show|head|append|keygen``: the admin audit trail.

Exit codes: 0 the trail is intact (or the command was done), 1 tampering was
found (each problem names the line and entry), 2 bad usage or an unreadable file.
The trail is ``--file``, else the ``audit.trail`` of the gateway configuration
given with ``--config``, else ``$KGW_AUDIT_TRAIL``, else ``audit/audit.jsonl``. The
HMAC key comes from ``--key-file``, else that configuration's ``audit.key_file``,
else ``$KGW_AUDIT_KEY_FILE``; keep it outside the repository, mode 0600.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..audit import AuditError, AuditTrail, load_key, write_new_key
from ..audit.admin import TRAIL_ENV
from ..audit.trail import KEY_ENV

OK, TAMPERED, USAGE = 0, 1, 2
DEFAULT_FILE = "audit/audit.jsonl"


def _trail(args: argparse.Namespace) -> AuditTrail:
    section = None
    if getattr(args, "config", None):
        from ..config import ConfigError, load_config

        try:
            section = load_config(Path(args.config)).audit
        except ConfigError as exc:
            raise AuditError(f"configuration error: {exc}") from None
        if section is None and args.file is None:
            raise AuditError(f"{args.config} has no audit section")
    path = args.file or (section.trail if section else None)
    path = path or Path(os.environ.get(TRAIL_ENV) or DEFAULT_FILE)
    if args.key_file is not None or section is None:
        return AuditTrail.open(path, args.key_file)
    key = load_key(section.key_file) if section.key_file is not None else None
    return AuditTrail(path, key=key)


HEAD_LINE = re.compile(r"^\s*(?:seq\s+\d+\s+hash\s+)?([0-9a-f]{64})\s*$")


def expected_head(text: str | None) -> str | None:
    """The hash of ``--expect-head``: a bare hash, or the line ``kgw audit head``
    prints (``seq N hash H``) pasted whole."""
    if text is None:
        return None
    match = HEAD_LINE.match(text.lower())
    if match is None:
        raise AuditError(
            "--expect-head takes the 64-hex-digit hash kgw audit head printed "
            "(or its whole line, 'seq N hash H')"
        )
    return match.group(1)


def cmd_verify(args: argparse.Namespace) -> int:
    trail = _trail(args)
    if not trail.path.exists():
        raise AuditError(f"{trail.path}: no such audit trail")
    report = trail.verify(expected_head(args.expect_head), require_head=not args.no_head)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "entries": report.entries,
                    "last_seq": report.last_seq,
                    "last_hash": report.last_hash,
                    "problems": [
                        {"line": p.line, "seq": p.seq, "kind": p.kind, "message": p.message}
                        for p in report.problems
                    ],
                },
                indent=2,
            )
        )
    elif report.ok:
        kind = "keyed (HMAC-SHA-256)" if trail.keyed else "unkeyed (SHA-256)"
        print(
            f"ok: {trail.path}: {report.entries} entries, {kind}, "
            f"last seq {report.last_seq} hash {report.last_hash}"
        )
    else:
        for problem in report.problems:
            print(f"{trail.path}: {problem}")
        print(f"FAILED: {len(report.problems)} problem(s) in {trail.path}")
    return OK if report.ok else TAMPERED


def cmd_show(args: argparse.Namespace) -> int:
    entries = [
        entry
        for entry in _trail(args).entries()
        if (args.actor is None or entry["actor"] == args.actor)
        and (args.action is None or str(entry["action"]).startswith(args.action))
        and (args.since is None or entry["ts"] >= args.since)
        and (args.until is None or entry["ts"] < args.until)
    ]
    if args.last:
        entries = entries[-args.last :]
    for entry in entries:
        if args.json:
            print(json.dumps(entry, ensure_ascii=False))
            continue
        print(f"#{entry['seq']} {entry['ts']} {entry['actor']} {entry['action']} {entry['target']}")
        if not args.brief:
            print(f"    before: {_compact(entry['before'])}")
            print(f"    after:  {_compact(entry['after'])}")
    if not args.json:
        print(
            f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} (not verified: "
            "run kgw audit verify)"
        )
    return OK


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def cmd_head(args: argparse.Namespace) -> int:
    trail = _trail(args)
    last = None
    for entry in trail.entries():
        last = entry
    if last is None:
        print(f"{trail.path}: empty")
        return OK
    print(f"seq {last['seq']} hash {last['hash']}")
    print("keep this hash elsewhere; later: kgw audit verify --expect-head HASH", file=sys.stderr)
    return OK


def cmd_append(args: argparse.Namespace) -> int:
    try:
        before = json.loads(args.before) if args.before is not None else None
        after = json.loads(args.after) if args.after is not None else None
    except ValueError as exc:
        raise AuditError(f"--before/--after must be JSON: {exc}") from None
    entry = _trail(args).append(args.actor, args.action, args.target, before, after)
    print(f"appended seq {entry['seq']} hash {entry['hash']}")
    return OK


def cmd_keygen(args: argparse.Namespace) -> int:
    write_new_key(args.out)
    print(f"wrote a new audit key to {args.out} (mode 0600); keep it outside the repository")
    return OK


def _run(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except AuditError as exc:
            print(f"kgw: {exc}", file=sys.stderr)
            return USAGE

    return run


def register(commands: Any) -> None:
    audit = commands.add_parser("audit", help="admin audit trail: verify, show, head")
    sub = audit.add_subparsers(dest="audit_command", required=True)

    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--file",
            type=Path,
            help=f"the trail (default: --config's audit.trail, ${TRAIL_ENV}, {DEFAULT_FILE})",
        )
        p.add_argument("--config", help="the gateway's YAML configuration (its audit section)")
        p.add_argument(
            "--key-file",
            type=Path,
            help=f"HMAC key (default: --config's audit.key_file, ${KEY_ENV})",
        )

    p = sub.add_parser("verify", help="check the hash chain; exit 1 naming each tampered entry")
    where(p)
    p.add_argument("--expect-head", metavar="HASH", help="the last entry's hash, kept elsewhere")
    p.add_argument("--no-head", action="store_true", help="the .head file is not beside the trail")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run(cmd_verify))

    p = sub.add_parser("show", help="print entries (filters: --actor, --action, --since)")
    where(p)
    p.add_argument("--actor")
    p.add_argument("--action", help="an action or its prefix, e.g. policy.")
    p.add_argument("--since", help="RFC 3339 time, e.g. 2026-11-01T00:00:00Z")
    p.add_argument("--until", help="RFC 3339 time (exclusive)")
    p.add_argument("--last", type=int, metavar="N", help="only the last N entries")
    p.add_argument("--brief", action="store_true", help="one line per entry")
    p.add_argument("--json", action="store_true", help="JSON lines")
    p.set_defaults(func=_run(cmd_show))

    p = sub.add_parser("head", help="print the last entry's hash, to keep elsewhere")
    where(p)
    p.set_defaults(func=_run(cmd_head))

    p = sub.add_parser("append", help="record a change made outside kgw (scripts, runbooks)")
    where(p)
    p.add_argument("--actor", required=True)
    p.add_argument("--action", required=True, help="e.g. credentials.rotate")
    p.add_argument("--target", required=True)
    p.add_argument("--before", help="JSON value")
    p.add_argument("--after", help="JSON value")
    p.set_defaults(func=_run(cmd_append))

    p = sub.add_parser("keygen", help="write a new random HMAC key (mode 0600)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=_run(cmd_keygen))
