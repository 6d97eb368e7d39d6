"""``kgw keys create|list|rotate|disable|destroy``: the KEKs of record encryption.

The key manager is the one the record-encryption filter of the gateway's ``--config
FILE`` names (its ``filters:`` entry ``gateway.encryption:EncryptionFilter``). Every
change is appended to the admin audit trail (``--audit-trail`` or the config's
``audit`` section); key material is never printed or recorded. ``destroy`` is
crypto-shredding: every record ever written under the KEK becomes unreadable, for
good. Exit codes: 0 done, 1 refused (no such KEK, disabled, key manager unavailable),
2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..audit import AuditError
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..config import ConfigError, GatewayConfig, load_config
from ..encryption.policy import DEFAULT_KEK
from ..encryption.settings import ANY_TENANT, EncryptionSettings, PolicyConfig
from ..kms import KmsConfig, KmsError, open_kms
from ..kms.api import KekInfo, Kms

OK, REFUSED, USAGE = 0, 1, 2
FILTER_MODULE = "gateway.encryption:EncryptionFilter"


class Usage(Exception):
    """A command line or configuration that cannot be used; exit code 2."""


def kms_settings(config: GatewayConfig) -> KmsConfig:
    """The ``kms`` settings of the configuration's record-encryption filter."""
    for entry in config.filters:
        if entry.module == FILTER_MODULE:
            try:
                return KmsConfig.model_validate(entry.config.get("kms"))
            except ValueError as exc:
                raise Usage(f"the encryption filter's kms settings: {exc}") from None
    raise Usage(f"no filters entry with module {FILTER_MODULE!r} in the configuration")


def _config(path: str) -> GatewayConfig:
    try:
        return load_config(Path(path))
    except ConfigError as exc:
        raise Usage(f"configuration error: {exc}") from None


def _describe(info: KekInfo) -> dict[str, Any]:
    return {"name": info.name, "versions": list(info.versions), "enabled": info.enabled}


def change(
    kms: Kms, recorder: ChangeRecorder, actor: str, action: str, name: str
) -> dict[str, Any]:
    """Carry out one KEK change and record it (``KmsError`` when refused)."""
    before = next((_describe(k) for k in kms.list_keks() if k.name == name), None)
    after: dict[str, Any] | None
    if action == "create":
        after = _describe(kms.create(name))
    elif action == "rotate":
        after = _describe(kms.rotate(name))
    elif action == "disable":
        after = _describe(kms.disable(name))
    else:
        kms.destroy(name)
        after = None
    recorder.append(actor, f"kek.{action}", f"kek:{name}", before, after)
    return after or {"name": name, "destroyed": True}


def _run(args: argparse.Namespace) -> int:
    recorder: ChangeRecorder | None = None
    try:
        config = _config(args.config)
        kms = open_kms(kms_settings(config))
        try:
            if args.keys_command == "list":
                rows = [_describe(k) for k in kms.list_keks()]
                if args.json:
                    print(json.dumps(rows))
                for row in [] if args.json else rows:
                    state = "enabled" if row["enabled"] else "disabled"
                    versions = ",".join(str(v) for v in row["versions"])
                    print(f"{row['name']}\t{state}\tversions {versions}")
                return OK
            recorder = ChangeRecorder.for_command(args, config)
            outcome = change(kms, recorder, cli_actor(args), args.keys_command, args.name)
            print(json.dumps(outcome))
            code = OK
        finally:
            kms.close()
    except (Usage, AuditError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = USAGE
    except KmsError as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = REFUSED
    return recorder.finish(code) if recorder is not None else code


def register(commands: Any) -> None:
    keys = commands.add_parser(
        "keys", help="record-encryption KEKs: create, list, rotate, disable, destroy"
    )
    sub = keys.add_subparsers(dest="keys_command", required=True)
    helps = {
        "create": "a new KEK (version 1), e.g. one per tenant",
        "rotate": "a new version for new DEKs; old versions still decrypt",
        "disable": "no new DEKs under it (writes refused); old records still decrypt",
        "destroy": "crypto-shredding: every record written under it becomes unreadable",
    }
    for name, text in helps.items():
        parser = sub.add_parser(name, help=text)
        parser.add_argument("--config", required=True, help="the gateway's YAML configuration")
        parser.add_argument("name", metavar="KEK")
        add_audit_args(parser, actor=True)
    listing = sub.add_parser("list", help="every KEK, its versions and state")
    listing.add_argument("--config", required=True, help="the gateway's YAML configuration")
    listing.add_argument("--json", action="store_true")
    keys.set_defaults(func=_run)


def tenant_keks(
    policies: list[PolicyConfig], tenant: str, tenants: Collection[str] = ()
) -> tuple[list[str], list[str]]:
    """The KEKs the policies put ``tenant``'s records under: ``(own, shared)``. Own: the
    tenant-named KEK (the default) and any a policy of this tenant alone names; shared:
    a KEK a policy also uses for other tenants (``"*"`` with a ``kek``, or another
    tenant's policy naming it, or the KEK of another tenant of that name, ``tenants``
    being the tenants there are) — destroying it would shred their records too."""
    users: dict[str, set[str | None]] = {tenant: {tenant}}
    for policy in policies:
        if policy.kek is not None:
            users.setdefault(policy.kek, set()).add(policy.tenant)
    # A KEK is also its namesake tenant's own (a policy without ``kek`` puts a tenant's
    # records under the KEK of its name), and "default" that of connections without a
    # tenant: named by a policy of this tenant, it is not this tenant's alone.
    implicit = {p.tenant for p in policies if p.kek is None}
    for kek, who in users.items():
        if kek == tenant:
            continue
        if kek in implicit or (ANY_TENANT in implicit and kek in tenants):
            who.add(kek)
        if kek == DEFAULT_KEK and ANY_TENANT in implicit:
            who.add(None)  # connections without a tenant
    if tenant == DEFAULT_KEK and ANY_TENANT in implicit:
        users[tenant].add(None)
    own = [k for k, who in users.items() if who <= {tenant}]
    shared = [k for k, who in users.items() if k not in own and who & {tenant, ANY_TENANT}]
    return own, shared


def shred(args: argparse.Namespace, tenant: str, tenants: Collection[str] = ()) -> int:
    """``kgw tenant delete --shred``: destroy the KEKs of the tenant's records (each
    recorded like ``destroy``). A KEK shared with other tenants is not destroyed: that
    is said, and the exit code is 1 (the tenant's records under it stay readable)."""
    try:
        config = _config(args.config)
        policies = _policies(config)
    except Usage as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        return USAGE
    own, shared = tenant_keks(policies, tenant, tenants)
    code = OK
    for kek in own:
        done = _run(argparse.Namespace(**{**vars(args), "keys_command": "destroy", "name": kek}))
        code = code or done
    for kek in shared:
        print(
            f"kgw: KEK {kek!r} also encrypts other tenants' records: not destroyed; "
            f"{tenant}'s records under it stay readable",
            file=sys.stderr,
        )
        code = code or REFUSED
    return code


def _policies(config: GatewayConfig) -> list[PolicyConfig]:
    for entry in config.filters:
        if entry.module == FILTER_MODULE:
            try:
                return EncryptionSettings.model_validate(dict(entry.config)).policies
            except ValueError as exc:
                raise Usage(f"the encryption filter's settings: {exc}") from None
    raise Usage(f"no filters entry with module {FILTER_MODULE!r} in the configuration")
