"""``kgw report compliance``: access, denials and admin changes for a period, HTML and CSV.

``--from`` and ``--to`` take RFC 3339 times or dates; a date given to ``--to``
includes that whole day. Exit codes: 0 written (even when the audit trail fails
verification: the report says so in red), 2 bad usage, unreadable input or no Spark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..analytics.records import parse_rfc3339
from ..analytics.spark import DEFAULT_MASTER, Progress, SparkUnavailable

OK, USAGE = 0, 2
DAY = 86_400


def _period(args: argparse.Namespace) -> tuple[float, float]:
    try:
        start = parse_rfc3339(args.start)
        end = parse_rfc3339(args.end)
    except ValueError as exc:
        raise ValueError(f"--from/--to: {exc}") from None
    if len(args.end.strip()) == 10:  # a date: the whole day
        end += DAY
    if end <= start:
        raise ValueError("--to must be after --from")
    return start, end


def cmd_compliance(args: argparse.Namespace) -> int:
    from ..analytics.compliance import compliance
    from ..analytics.load import LogInputError
    from ..analytics.spark import running

    try:
        start, end = _period(args)
        progress = Progress("compliance", 5, quiet=args.quiet)
        progress.stage(f"starting Spark ({args.master})")
        with running(args.master, "kgw-compliance", args.driver_memory) as spark:
            result = compliance(
                spark,
                args.logs,
                Path(args.out),
                start,
                end,
                Path(args.audit) if args.audit else None,
                Path(args.key_file) if args.key_file else None,
                progress,
                args.format,
            )
    except (ValueError, LogInputError, SparkUnavailable) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        return USAGE
    progress.finish()
    print(
        f"{len(result.access)} principal/topic/operation rows, {result.denied_total} denied "
        f"attempts, {len(result.changes)} admin changes; audit trail: {result.audit_status}"
    )
    for name, path in result.paths.items():
        print(f"{name}: {path}")
    return OK


def register(commands: Any) -> None:
    report = commands.add_parser("report", help="reports for auditors: compliance")
    sub = report.add_subparsers(dest="report_command", required=True)
    p = sub.add_parser("compliance", help="who accessed what, denials, admin changes (HTML, CSV)")
    p.add_argument("--from", dest="start", required=True, help="RFC 3339 time or date")
    p.add_argument("--to", dest="end", required=True, help="RFC 3339 time (exclusive) or date")
    p.add_argument(
        "--logs",
        action="append",
        required=True,
        metavar="PATH",
        help="access logs (JSON lines or Parquet; repeat for more)",
    )
    p.add_argument("--format", choices=("auto", "json", "parquet"), default="auto")
    p.add_argument("--audit", help="the audit trail (verified; its changes in the period listed)")
    p.add_argument("--key-file", help="the audit trail's HMAC key (default $KGW_AUDIT_KEY_FILE)")
    p.add_argument("--out", default="compliance", help="output directory (default compliance)")
    p.add_argument("--master", default=DEFAULT_MASTER)
    p.add_argument("--driver-memory", default="3g")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_compliance)
