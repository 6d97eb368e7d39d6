"""The ``kgw`` command. Each command group lives in its own module with a
``register(subparsers)`` function, listed in ``GROUPS``.

A command imports only its own group's module (the gateway's configuration and
protocol modules take half a second to import, which ``kgw analyze`` does not need);
help, ``--version`` and unknown commands build the whole parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from .. import __version__

GROUPS = (
    "serve",
    "dev",
    "certs",
    "policy",
    "audit",
    "quota",
    "apikey",
    "scram",
    "analyze",
    "report",
    "tenant",
    "keys",
    "status",
)
OTHER_COMMANDS = {"check-config": "serve", "simulate": "analyze"}  # command -> its group


def build_parser(groups: Sequence[str] = GROUPS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgw", description="KaaS Gateway")
    parser.add_argument("--version", action="version", version=f"kgw {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in groups:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    return parser


def groups_for(argv: Sequence[str]) -> Sequence[str]:
    """The one group that registers ``argv``'s command, or all of them."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    group = OTHER_COMMANDS.get(command or "", command)
    return (group,) if group in GROUPS else GROUPS


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    args = build_parser(groups_for(arguments)).parse_args(arguments)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
