"""``kgw tenant create|list|show|suspend|resume|delete``: one command per tenant lifecycle step.

Every command takes the gateway's ``--config FILE``: the stores it names
(``sasl.credential_store`` and the tenant store beside it, ``authorization``,
``quotas``) are the ones changed. ``create`` prints the API secret once on stdout
and writes it only into the bundle's 0600 files. Exit codes: 0 done, 1 refused
(exists, unknown plan, store unavailable...), 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..audit import AuditError, audit_credential_store, audit_policy_store, audit_quota_store
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..authz.store import PolicyError, PolicyStore
from ..config import ConfigError, GatewayConfig, load_config
from ..credentials import CorruptRecord, InvalidCredential, StoreError, open_store
from ..quotas.store import StoreError as QuotaStoreError
from ..quotas.store import open_store as open_quota_store
from ..tenants import onboard
from ..tenants.model import Tenant, TenantError, role_filter
from ..tenants.store import open_tenant_store

OK, REFUSED, USAGE = 0, 1, 2
Command = Callable[[onboard.Stores, argparse.Namespace], Awaitable[int]]


class Usage(Exception):
    """A command line that cannot be carried out; exit code 2."""


_actor = cli_actor


def _config(args: argparse.Namespace) -> GatewayConfig:
    try:
        config = load_config(Path(args.config))
    except ConfigError as exc:
        raise Usage(f"configuration error: {exc}") from None
    if config.sasl is None or config.sasl.credential_store is None:
        raise Usage(f"{args.config} has no sasl.credential_store section")
    if config.authorization is None:
        raise Usage(f"{args.config} has no authorization section")
    if config.quotas is None:
        raise Usage(f"{args.config} has no quotas section")
    return config


def _notifier(config: GatewayConfig, store: PolicyStore) -> Callable[[], None]:
    notices = config.authorization.redis if config.authorization is not None else None
    if notices is None:
        return lambda: None

    def notify() -> None:
        from ..authz.notify import publish_once

        try:
            publish_once(notices.url, notices.channel, store.read(fresh=True).digest)
        except Exception as exc:  # written; gateways see it at their next poll
            print(
                f"kgw: warning: could not notify gateways ({type(exc).__name__})", file=sys.stderr
            )

    return notify


def _run(args: argparse.Namespace, command: Command) -> int:
    """Open the stores, run ``command``, map failures to exit codes.

    Commands that change something (those with ``--audit-trail``) record every store
    change in the admin audit trail; an unusable trail refuses them before any change.
    """
    recorder: ChangeRecorder | None = None
    try:
        config = _config(args)
        if hasattr(args, "audit_trail"):
            recorder = ChangeRecorder.for_command(args, config)
        auth, cred = config.authorization, config.sasl.credential_store  # type: ignore[union-attr]
        assert auth is not None and cred is not None and config.quotas is not None
        policies = PolicyStore(
            auth.policy_dir,
            model_file=auth.model_file,
            policy_file=auth.policy_file,
            super_users=auth.super_users,
        )
        quotas = open_quota_store(config.quotas)

        async def main() -> int:
            stores = onboard.Stores(
                config, open_store(cred), open_tenant_store(cred), policies, quotas,
                _notifier(config, policies),
            )  # fmt: skip
            if recorder is not None:
                audit_credential_store(stores.credentials, recorder)
                audit_policy_store(policies, recorder)
                audit_quota_store(quotas, recorder)
                stores.tenants.add_hook(recorder.append)
                stores.record = recorder.append  # certificates issued and revoked
            try:
                return await command(stores, args)
            finally:
                await stores.credentials.close()
                await stores.tenants.close()
                quotas.close()

        code = asyncio.run(main())
    except (Usage, AuditError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = USAGE
    except (
        TenantError, InvalidCredential, StoreError, CorruptRecord, PolicyError, QuotaStoreError
    ) as exc:  # fmt: skip
        print(f"kgw: {exc}", file=sys.stderr)
        code = REFUSED
    return recorder.finish(code) if recorder is not None else code


def _when(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_secret(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes().strip()
    except OSError as exc:
        raise Usage(f"cannot read {path}: {exc.strerror}") from None


# -- commands ---------------------------------------------------------------------


async def _create(stores: onboard.Stores, args: argparse.Namespace) -> int:
    certificate = None
    if args.cert:
        if args.ca_dir is None:
            raise Usage("--cert needs --ca-dir (a CA made with kgw certs init-ca)")
        certificate = onboard.CertificateRequest(
            Path(args.ca_dir), _read_secret(args.ca_password_file)
        )
    created = await onboard.create(
        stores, args.name, args.plan, actor=_actor(args),
        bundle_dir=Path(args.bundle_dir) if args.bundle_dir else None,
        listener=args.listener, server_ca=Path(args.server_ca) if args.server_ca else None,
        certificate=certificate, names=args.namespace,
    )  # fmt: skip
    tenant = created.tenant
    if args.json:
        where = str(created.bundle_dir) if created.bundle_dir else None
        extra = {"api_key": created.key_id, "secret": created.secret, "bundle": where}
        print(json.dumps({**tenant.to_record(), **extra}))
    else:
        print(f"tenant:    {tenant.name}")
        print(f"plan:      {tenant.plan}")
        print(f"namespace: {tenant.prefix} (topics, groups, transactional ids)")
        print(f"names:     {tenant.namespace}")
        print(f"api key:   {created.key_id}")
        print(f"secret:    {created.secret}")
        if created.bundle_dir is not None:
            print(f"bundle:    {created.bundle_dir}")
    print("kgw: the secret is shown only now; the bundle's files hold it (0600)", file=sys.stderr)
    listener = onboard.sasl_listener(stores.config, args.listener)
    if listener.tls is not None and args.server_ca is None and created.bundle_dir is not None:
        print(
            f"kgw: warning: listener {listener.name!r} uses TLS and the bundle has no CA: "
            "its clients trust their system's CAs only (give --server-ca when the "
            "gateway's certificate comes from a private CA)",
            file=sys.stderr,
        )
    if certificate is not None and listener.tls is not None and listener.tls.client_auth == "none":
        print(
            f"kgw: warning: listener {listener.name!r} asks for no client certificate "
            "(tls.client_auth: none): the one issued is not used there",
            file=sys.stderr,
        )
    return OK


def _row(tenant: Tenant) -> tuple[str, ...]:
    return (tenant.name, tenant.state, tenant.plan, tenant.prefix, _when(tenant.created_at),
            ",".join(tenant.api_keys))  # fmt: skip


async def _list(stores: onboard.Stores, args: argparse.Namespace) -> int:
    tenants = sorted((await stores.tenants.all()).values(), key=lambda t: t.name)
    if args.json:
        print(json.dumps([t.to_record() for t in tenants]))
        return OK
    rows = [("NAME", "STATE", "PLAN", "NAMESPACE", "CREATED", "API_KEYS"), *map(_row, tenants)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"{len(tenants)} tenant(s)")
    return OK


async def _show(stores: onboard.Stores, args: argparse.Namespace) -> int:
    tenant = await stores.tenants.get(args.name)
    if tenant is None:
        raise TenantError(f"no tenant {args.name!r}")
    keys = [k.public() for k in await stores.credentials.list_api_keys() if k.tenant == tenant.name]
    rules = [str(r) for r in stores.policies.list(role_filter(tenant.name))]
    detail: dict[str, Any] = {**tenant.to_record(), "keys": keys, "rules": rules}
    if args.json:
        print(json.dumps(detail))
        return OK
    for key in ("name", "state", "plan", "prefix"):
        print(f"{key + ':':10} {detail[key]}")
    print(f"{'created:':10} {_when(tenant.created_at)}")
    print(f"{'changed:':10} {_when(tenant.changed_at)}")
    for public in keys:
        print(f"{'api key:':10} {public['key_id']} {public['principal']} {public['state']}")
    for rule in rules:
        print(f"{'rule:':10} {rule}")
    return OK


async def _names(stores: onboard.Stores, args: argparse.Namespace) -> int:
    tenant = await onboard.set_names(stores, args.name, args.mode, actor=_actor(args))
    print(f"names: {tenant.name} now {tenant.namespace} (cluster-side names unchanged)")
    return OK


async def _suspend(stores: onboard.Stores, args: argparse.Namespace) -> int:
    tenant = await onboard.set_state(stores, args.name, "suspended", actor=_actor(args))
    print(f"suspended: {tenant.name} (gateways close its connections within a second)")
    return OK


async def _resume(stores: onboard.Stores, args: argparse.Namespace) -> int:
    tenant = await onboard.set_state(stores, args.name, "active", actor=_actor(args))
    print(f"resumed: {tenant.name}")
    return OK


async def _delete(stores: onboard.Stores, args: argparse.Namespace) -> int:
    report = await onboard.delete(
        stores, args.name, actor=_actor(args), delete_data=args.delete_data,
        ca_dir=Path(args.ca_dir) if args.ca_dir else None,
        ca_password=_read_secret(args.ca_password_file),
    )  # fmt: skip
    print(f"deleted tenant: {report.tenant.name} (its connections are closed within a second)")
    print(f"revoked API keys: {', '.join(report.revoked_keys) or '(none active)'}")
    if report.removed_scram:
        print(f"removed SCRAM credentials: {', '.join(report.removed_scram)}")
    print(f"removed policy rules: {report.removed_rules}, role memberships: "
          f"{report.removed_members}")  # fmt: skip
    if report.certificates_revoked:
        print(f"revoked certificates: {', '.join(report.certificates_revoked)}")
    elif report.tenant.certificates:
        print(f"certificates NOT revoked (no --ca-dir): {', '.join(report.tenant.certificates)}")
    if args.delete_data:
        print(f"deleted topics: {', '.join(report.topics_deleted) or '(none)'}")
        for topic, error in report.topics_failed.items():
            print(f"could not delete topic {topic}: {error}")
    elif report.topics_unlisted is not None:
        print(
            f"kept data: its topics (prefix {report.tenant.prefix}) could not be listed: "
            f"{report.topics_unlisted}; delete them with --delete-data once it is reachable"
        )
    else:
        print(f"kept data: topics {', '.join(report.topics_kept) or '(none)'} "
              "(delete them with --delete-data)")  # fmt: skip
    code = REFUSED if report.topics_failed else OK
    if args.shred:  # crypto-shredding: the tenant's KEK, and with it every record under it
        from .keys import shred

        others = set(await stores.tenants.all()) - {args.name}  # whose KEKs are theirs
        code = shred(args, args.name, others) or code
    return code


_COMMANDS: dict[str, Command] = {
    "create": _create,
    "list": _list,
    "show": _show,
    "suspend": _suspend,
    "names": _names,
    "resume": _resume,
    "delete": _delete,
}


def _cmd_tenant(args: argparse.Namespace) -> int:
    return _run(args, _COMMANDS[args.tenant_command])


def register(commands: Any) -> None:
    tenant = commands.add_parser(
        "tenant", help="tenant onboarding: create, list, show, suspend, resume, delete"
    )
    sub = tenant.add_subparsers(dest="tenant_command", required=True)

    def common(parser: argparse.ArgumentParser, named: bool = True) -> None:
        parser.add_argument("--config", required=True, help="the gateway's YAML configuration")
        if named:
            parser.add_argument("name", metavar="NAME")
        parser.add_argument("--actor", help="who makes the change (default: cli:<login>)")

    create = sub.add_parser("create", help="namespace, policies, plan, API key, bundle")
    common(create)
    create.add_argument("--plan", required=True, help="a configured or stored quota plan")
    create.add_argument("--bundle-dir", help="write the connection bundle here (a new directory)")
    create.add_argument("--listener", help="the SASL listener to connect to (default: the first)")
    create.add_argument("--server-ca", help="PEM CA the clients trust (TLS listeners)")
    create.add_argument("--cert", action="store_true", help="also issue an mTLS client certificate")
    create.add_argument("--ca-dir", help="with --cert: the kgw certs CA directory that signs it")
    create.add_argument("--ca-password-file", help="the CA key's passphrase, if it has one")
    create.add_argument("--json", action="store_true", help="one JSON object on stdout")
    create.add_argument(
        "--namespace", choices=("prefixed", "transparent"), default="prefixed",
        help="transparent: the tenant uses plain names, the gateway adds its prefix",
    )  # fmt: skip
    add_audit_args(create)

    listing = sub.add_parser("list", help="every tenant and its state")
    common(listing, named=False)
    listing.add_argument("--json", action="store_true")

    show = sub.add_parser("show", help="one tenant: state, keys, rules")
    common(show)
    show.add_argument("--json", action="store_true")

    for state, text in (("suspend", "refuse and close its connections"), ("resume", "accept it")):
        changing = sub.add_parser(state, help=text)
        common(changing)
        add_audit_args(changing)

    names = sub.add_parser("names", help="switch between prefixed and transparent names")
    common(names)
    names.add_argument("mode", choices=("prefixed", "transparent"))
    add_audit_args(names)

    delete = sub.add_parser("delete", help="revoke credentials, remove policies; keep data")
    common(delete)
    delete.add_argument("--delete-data", action="store_true", help="also delete its topics")
    delete.add_argument(
        "--shred", action="store_true", help="also destroy its record-encryption KEK"
    )
    delete.add_argument("--ca-dir", help="revoke its client certificates in this CA")
    delete.add_argument("--ca-password-file", help="the CA key's passphrase, if it has one")
    add_audit_args(delete)
    tenant.set_defaults(func=_cmd_tenant)
