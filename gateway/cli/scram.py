"""``kgw scram add|remove|list``: SCRAM-SHA-256/512 credentials.

The password is read from a prompt (asked twice) or, when standard input is not
a terminal, from its first line; never from the command line. Only the salted
keys (RFC 5802's StoredKey and ServerKey) are stored. The store is chosen as for
``kgw apikey``. Exit codes: 0 done, 1 refused, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from ..audit.admin import add_audit_args
from ..credentials import CredentialStore
from ..credentials.hashing import SCRAM_HASHES, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS
from .apikey import OK, REFUSED, USAGE, Refused, actor, run, store_args, store_settings, table, when

DEFAULT_ITERATIONS = 8192


def _password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Password again: ") != first:
            raise Refused("the passwords differ")
        return first
    line = sys.stdin.readline()
    return line.removesuffix("\n").removesuffix("\r")


async def _add(store: CredentialStore, args: argparse.Namespace) -> int:
    iterations = args.iterations
    if iterations is None:
        iterations = store_settings(args)[1] or DEFAULT_ITERATIONS
    password = _password()
    if not password:
        raise Refused("the password must not be empty")
    credential = await store.put_scram(
        args.user,
        args.mechanism,
        password,
        iterations=iterations,
        tenant=args.tenant,
        actor=actor(args),
    )
    print(
        f"stored: {credential.user} {credential.mechanism} "
        f"({credential.iterations} iterations, principal {credential.principal})"
    )
    return OK


async def _remove(store: CredentialStore, args: argparse.Namespace) -> int:
    mechanisms = [args.mechanism] if args.mechanism else list(SCRAM_HASHES)
    removed = await store.remove_scram(args.user, mechanisms, actor=actor(args))
    for credential in removed:
        print(f"removed: {credential.user} {credential.mechanism}")
    if not removed:
        print(f"kgw: no SCRAM credential for {args.user!r}", file=sys.stderr)
        return REFUSED
    return OK


async def _list(store: CredentialStore, args: argparse.Namespace) -> int:
    credentials = await store.list_scram()
    if args.json:
        print(json.dumps([c.public() for c in credentials]))
        return OK
    header = ("USER", "MECHANISM", "ITERATIONS", "TENANT", "CREATED")
    rows = [
        (c.user, c.mechanism, str(c.iterations), c.tenant or "-", when(c.created_at))
        for c in credentials
    ]
    table([header, *rows])
    print(f"{len(rows)} credential(s)")
    return OK


_COMMANDS = {"add": _add, "remove": _remove, "list": _list}


def _cmd_scram(args: argparse.Namespace) -> int:
    if getattr(args, "iterations", None) is not None and not (
        SCRAM_MIN_ITERATIONS <= args.iterations <= SCRAM_MAX_ITERATIONS
    ):
        print(
            f"kgw: --iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}",
            file=sys.stderr,
        )
        return USAGE
    return run(args, _COMMANDS[args.scram_command])


def register(commands: Any) -> None:
    scram = commands.add_parser("scram", help="SCRAM-SHA-256/512 credentials: add, remove, list")
    sub = scram.add_subparsers(dest="scram_command", required=True)

    add = sub.add_parser("add", help="add or replace a user's credential (password from a prompt)")
    store_args(add)
    add.add_argument("user", metavar="USER")
    add.add_argument("--mechanism", required=True, choices=list(SCRAM_HASHES))
    add.add_argument(
        "--iterations",
        type=int,
        help=f"PBKDF2 iterations, {SCRAM_MIN_ITERATIONS}-{SCRAM_MAX_ITERATIONS} "
        f"(default: the config's sasl.scram_iterations, else {DEFAULT_ITERATIONS})",
    )
    add.add_argument("--tenant", help="the tenant the user belongs to (optional)")
    add.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(add)

    remove = sub.add_parser("remove", help="remove a user's credentials")
    store_args(remove)
    remove.add_argument("user", metavar="USER")
    remove.add_argument("--mechanism", choices=list(SCRAM_HASHES), help="default: both")
    remove.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(remove)

    listing = sub.add_parser("list", help="every SCRAM user (never a key)")
    store_args(listing)
    listing.add_argument("--json", action="store_true", help="a JSON array on stdout")
    scram.set_defaults(func=_cmd_scram)
