"""The ``kgw`` command. Each command group lives in its own module with a
``register(subparsers)`` function, listed in ``GROUPS``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .. import __version__
from . import analyze, apikey, audit, certs, dev, policy, quota, report, scram, serve, tenant

GROUPS = (serve, dev, certs, policy, audit, quota, apikey, scram, analyze, report, tenant)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgw", description="KaaS Gateway")
    parser.add_argument("--version", action="version", version=f"kgw {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
