"""``kgw apikey create|list|revoke``: tenant API keys for SASL/PLAIN.

The store is the one the gateway's ``--config FILE`` names
(``sasl.credential_store``), or ``--store-file PATH`` / ``--redis-url URL``.
``create`` prints the secret once; it is stored only as a slow hash and no
command can show it again. Exit codes: 0 done, 1 refused (no such key, invalid
value, store unavailable), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..audit import AuditError, audit_credential_store
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..config import ConfigError, GatewayConfig, load_config
from ..credentials import (
    CorruptRecord,
    CredentialStore,
    CredentialStoreConfig,
    InvalidCredential,
    StoreError,
    open_store,
)
from ..redisurl import url_problem

OK, REFUSED, USAGE = 0, 1, 2
Command = Callable[[CredentialStore, argparse.Namespace], Awaitable[int]]


class Usage(Exception):
    """A command line that cannot be carried out; exit code 2."""


class Refused(Exception):
    """A change the store refused; exit code 1."""


def store_settings(args: argparse.Namespace) -> tuple[CredentialStoreConfig, int | None]:
    """The store to use, and the configured SCRAM iteration count (if a config names it)."""
    if args.config:
        try:
            config = load_config(Path(args.config))
        except ConfigError as exc:
            raise Usage(f"configuration error: {exc}") from None
        if config.sasl is None or config.sasl.credential_store is None:
            raise Usage(f"{args.config} has no sasl.credential_store section")
        return config.sasl.credential_store, config.sasl.scram_iterations
    if args.store_file:
        return CredentialStoreConfig(file=Path(args.store_file)), None
    if args.redis_url:
        try:
            return CredentialStoreConfig(redis_url=args.redis_url), None
        except ValidationError as exc:
            raise Usage(f"--redis-url: {url_problem(exc)}") from None
    raise Usage("name the credential store: --config FILE, --store-file PATH or --redis-url URL")


actor = cli_actor


def gateway_config(args: argparse.Namespace) -> GatewayConfig | None:
    if not getattr(args, "config", None):
        return None
    try:
        return load_config(Path(args.config))
    except ConfigError as exc:
        raise Usage(f"configuration error: {exc}") from None


def run(
    args: argparse.Namespace,
    command: Callable[[CredentialStore, argparse.Namespace], Awaitable[int]],
) -> int:
    """Open the store, run ``command``, map failures to exit codes.

    Commands that change the store (those with ``--audit-trail``) are recorded in
    the audit trail; an unusable trail refuses them before anything changes.
    """
    recorder: ChangeRecorder | None = None
    try:
        settings, _ = store_settings(args)
        if hasattr(args, "audit_trail"):
            recorder = ChangeRecorder.for_command(args, gateway_config(args))

        args.store_settings = settings  # commands that look beside it (tenant records)

        async def main() -> int:
            store = open_store(settings)
            if recorder is not None:
                audit_credential_store(store, recorder)
            try:
                return await command(store, args)
            finally:
                await store.close()

        code = asyncio.run(main())
    except (Usage, AuditError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = USAGE
    except (Refused, InvalidCredential, StoreError, CorruptRecord) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = REFUSED
    return recorder.finish(code) if recorder is not None else code


def table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = zip(row, widths, strict=True)
        print("  ".join(cell.ljust(width) for cell, width in cells).rstrip())


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    moment = dt.datetime.fromtimestamp(timestamp, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def store_args(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config", help="the gateway's YAML configuration (sasl.credential_store)")
    where.add_argument("--store-file", help="a credential file (single instance)")
    where.add_argument("--redis-url", help="a Redis credential store (prefer --config: no secrets)")


# -- commands ---------------------------------------------------------------------


async def _check_tenant(args: argparse.Namespace) -> None:
    """The key's tenant as the tenant store knows it: a deleted or suspended one is
    refused; one it does not know (keys made without ``kgw tenant``) is said, as is a
    principal named for another tenant."""
    from ..tenants.store import open_tenant_store

    tenants = open_tenant_store(args.store_settings)
    try:
        record = await tenants.get(args.tenant)
        others = [n for n in (await tenants.all()) if n != args.tenant]
    finally:
        await tenants.close()
    if record is not None and record.state != "active":
        raise Refused(
            f"tenant {args.tenant!r} is {record.state}: no new key for it "
            "(kgw tenant resume, or create it again)"
        )
    if record is None:
        print(
            f"warning: no tenant {args.tenant!r} in the tenant store: the key works, but "
            "kgw tenant suspend/delete will not reach it (kgw tenant create makes tenants)",
            file=sys.stderr,
        )
    name = args.principal.split(":", 1)[-1]
    owner = next((o for o in others if name.startswith(f"{o}.")), None)
    if owner is not None and not name.startswith(f"{args.tenant}."):
        print(
            f"warning: principal {args.principal} is named for tenant {owner!r}, "
            f"not {args.tenant!r}",
            file=sys.stderr,
        )


async def _create(store: CredentialStore, args: argparse.Namespace) -> int:
    await _check_tenant(args)
    expires_at = None
    if args.expires_days is not None:
        if args.expires_days <= 0:
            raise Usage("--expires-days must be positive")
        expires_at = time.time() + args.expires_days * 86400
    key, secret = await store.create_api_key(
        principal=args.principal,
        tenant=args.tenant,
        description=args.description or "",
        expires_at=expires_at,
        actor=actor(args),
    )
    if args.json:
        print(json.dumps({**key.public(), "secret": secret}))
    else:
        print(f"key_id:    {key.key_id}")
        print(f"secret:    {secret}")
        print(f"principal: {key.principal}")
        print(f"tenant:    {key.tenant}")
        print(f"expires:   {when(key.expires_at)}")
    print(
        "kgw: the secret is shown only now and cannot be recovered; clients use "
        "sasl.mechanism=PLAIN, sasl.username=<key_id>, sasl.password=<secret>",
        file=sys.stderr,
    )
    return OK


async def _list(store: CredentialStore, args: argparse.Namespace) -> int:
    keys = [k for k in await store.list_api_keys() if not args.tenant or k.tenant == args.tenant]
    if args.json:
        print(json.dumps([key.public() for key in keys]))
        return OK
    header = ("KEY_ID", "TENANT", "PRINCIPAL", "STATE", "CREATED", "EXPIRES", "DESCRIPTION")
    rows = [
        (
            k.key_id,
            k.tenant,
            k.principal,
            k.state if k.usable() or k.state != "active" else "expired",
            when(k.created_at),
            when(k.expires_at),
            k.description,
        )
        for k in keys
    ]
    table([header, *rows])
    print(f"{len(rows)} key(s)")
    return OK


async def _revoke(store: CredentialStore, args: argparse.Namespace) -> int:
    try:
        key = await store.revoke_api_key(args.key_id, actor=actor(args))
    except KeyError:
        raise Refused(f"no API key {args.key_id!r}") from None
    print(f"revoked: {key.key_id} ({key.principal}, tenant {key.tenant})")
    return OK


_COMMANDS: dict[str, Command] = {
    "create": _create,
    "list": _list,
    "revoke": _revoke,
}


def _cmd_apikey(args: argparse.Namespace) -> int:
    return run(args, _COMMANDS[args.apikey_command])


def register(commands: Any) -> None:
    apikey = commands.add_parser(
        "apikey", help="tenant API keys (SASL/PLAIN): create, list, revoke"
    )
    sub = apikey.add_subparsers(dest="apikey_command", required=True)

    create = sub.add_parser("create", help="a new key; prints its secret once")
    store_args(create)
    create.add_argument("--tenant", required=True, help="the tenant the key belongs to")
    create.add_argument("--principal", required=True, help="e.g. User:<tenant>.<app>")
    create.add_argument("--description", help="what the key is for")
    create.add_argument("--expires-days", type=float, help="the key stops working after this")
    create.add_argument("--json", action="store_true", help="one JSON object on stdout")
    create.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(create)

    listing = sub.add_parser("list", help="every key (never a secret)")
    store_args(listing)
    listing.add_argument("--tenant", help="only this tenant's keys")
    listing.add_argument("--json", action="store_true", help="a JSON array on stdout")

    revoke = sub.add_parser("revoke", help="stop a key from authenticating, at once")
    store_args(revoke)
    revoke.add_argument("key_id", metavar="ID")
    revoke.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(revoke)
    apikey.set_defaults(func=_cmd_apikey)
