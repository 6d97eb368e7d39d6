"""``kgw status``: the service at a glance from the gateways' ``/metrics`` endpoints.

``--url`` (repeatable) names each gateway instance's metrics endpoint; without it, the
``metrics`` section of ``--config`` gives the one local instance. ``--watch N``
redraws every N seconds until interrupted; ``--json`` prints the summary for scripts.
Exit codes: 0 shown, 1 no gateway answered, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

OK, DOWN, USAGE = 0, 1, 2
TIMEOUT_S = 5.0
CLEAR = "\x1b[H\x1b[2J"


def _urls(args: argparse.Namespace) -> list[str]:
    if args.url:
        return list(args.url)
    from ..config import ConfigError, load_config

    try:
        config = load_config(Path(args.config))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if config.metrics is None or not config.metrics.enabled:
        raise ValueError("the configuration has no metrics endpoint: give --url")
    host = config.metrics.bind_host
    host = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    return [f"http://{host}:{config.metrics.port}/metrics"]


def _scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            body: bytes = response.read()
            return body.decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def cmd_status(args: argparse.Namespace) -> int:
    from ..monitoring.status import render, summarize

    try:
        urls = _urls(args)
    except ValueError as exc:
        print(f"kgw status: {exc}", file=sys.stderr)
        return USAGE
    while True:
        summary = summarize([(url, _scrape(url)) for url in urls])
        if args.json:
            print(json.dumps(summary, sort_keys=True))
        else:
            prefix = CLEAR if args.watch and sys.stdout.isatty() else ""
            print(prefix + render(summary), end="", flush=True)
        if not args.watch:
            return OK if any(g["up"] for g in summary["gateways"]) else DOWN
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return OK


def register(commands: Any) -> None:
    parser = commands.add_parser("status", help="the service at a glance (from /metrics)")
    parser.add_argument("--config", default="gateway.yaml", help="gateway configuration")
    parser.add_argument("--url", action="append", help="a gateway's /metrics URL (repeatable)")
    parser.add_argument("--watch", type=float, metavar="SECONDS", help="redraw every SECONDS")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=cmd_status)
