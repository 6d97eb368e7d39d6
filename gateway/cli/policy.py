"""``kgw policy add|remove|list|lint|explain|role|init``: the policy files, for security admins.

Every command works on a policy directory: ``--policy-dir DIR``, or the one the
gateway's ``--config FILE`` names (which also brings its super users and Redis
notices), or ``policies``. Exit codes: 0 done, 1 the policy has errors or a change
was refused, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..audit import AuditError, audit_policy_store
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..authz.casbin_model import MODEL_CONF, ModelError, load_model
from ..authz.engine import Authorizer
from ..authz.lint import errors
from ..authz.model import (
    ANY_HOST,
    CLUSTER_NAME,
    AclFilter,
    AclRule,
    InvalidRuleError,
    Operation,
    PatternFilter,
    PatternType,
    Permission,
    ResourceType,
)
from ..authz.policyfile import parse_policy
from ..authz.store import PolicyError, PolicyStore
from ..config import AuthorizationConfig, ConfigError, GatewayConfig, load_config

OK, REFUSED, USAGE = 0, 1, 2
_RESOURCES = (
    ("topic", ResourceType.TOPIC),
    ("group", ResourceType.GROUP),
    ("transactional_id", ResourceType.TRANSACTIONAL_ID),
    ("delegation_token", ResourceType.DELEGATION_TOKEN),
)


class _Usage(Exception):
    """A command line that cannot be carried out; exit code 2."""


@dataclass(frozen=True, slots=True)
class _Target:
    store: PolicyStore
    super_users: tuple[str, ...] = ()
    redis_url: str | None = None
    redis_channel: str = ""
    config: GatewayConfig | None = None


def _target(args: argparse.Namespace) -> _Target:
    if args.config:
        try:
            config = load_config(Path(args.config))
        except ConfigError as exc:
            raise _Usage(f"configuration error: {exc}") from None
        auth: AuthorizationConfig | None = config.authorization
        if auth is None:
            raise _Usage(f"{args.config} has no authorization section")
        store = PolicyStore(
            auth.policy_dir,
            model_file=auth.model_file,
            policy_file=auth.policy_file,
            super_users=auth.super_users,
        )
        redis = auth.redis
        return _Target(
            store,
            tuple(auth.super_users),
            redis.url if redis else None,
            redis.channel if redis else "",
            config,
        )
    return _Target(PolicyStore(Path(args.policy_dir or "policies")))


_actor = cli_actor


def _resource(args: argparse.Namespace, required: bool) -> tuple[ResourceType, str] | None:
    chosen = [(rtype, getattr(args, attr)) for attr, rtype in _RESOURCES if getattr(args, attr)]
    if args.cluster:
        chosen.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if len(chosen) > 1:
        raise _Usage(
            "name one resource: --topic, --group, --cluster, --transactional-id or "
            "--delegation-token"
        )
    if not chosen:
        if required:
            raise _Usage(
                "name a resource: --topic, --group, --cluster, --transactional-id or "
                "--delegation-token"
            )
        return None
    return chosen[0]


def _operation(name: str) -> Operation:
    try:
        return Operation[name.upper().replace("-", "_")]
    except KeyError:
        names = ", ".join(op.name for op in Operation)
        raise _Usage(f"unknown operation {name!r} (one of {names})") from None


def _permission(args: argparse.Namespace) -> Permission | None:
    if args.deny:
        return Permission.DENY
    if args.allow:
        return Permission.ALLOW
    return None


def _notify(target: _Target) -> None:
    if target.redis_url is None:
        return
    from ..authz.notify import publish_once

    try:
        digest = target.store.read(fresh=True).digest
        reached = publish_once(target.redis_url, target.redis_channel, digest)
    except Exception as exc:  # the change is written; gateways will see it when they poll
        print(
            f"kgw: warning: could not notify gateways ({type(exc).__name__}); "
            "they pick the change up when they next poll",
            file=sys.stderr,
        )
        return
    print(f"notified {reached} gateway instance(s)")


# -- commands ---------------------------------------------------------------------


def _cmd_add(args: argparse.Namespace, target: _Target) -> int:
    resource = _resource(args, required=True)
    assert resource is not None
    rtype, name = resource
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    permission = Permission.DENY if args.deny else Permission.ALLOW
    rules = [
        AclRule(principal, rtype, pattern, name, _operation(op), host, permission)
        for principal in args.principal
        for op in args.operation
        for host in (args.host or [ANY_HOST])
    ]
    added = target.store.add(rules, _actor(args))
    for rule in rules:
        print(f"{'added' if rule in added else 'already present'}: {rule}")
    if added:
        _notify(target)
    return OK


def _filter(args: argparse.Namespace, default_pattern: PatternFilter) -> AclFilter:
    resource = _resource(args, required=False)
    pattern = PatternFilter[args.pattern.upper()] if args.pattern else default_pattern
    if args.prefixed:
        pattern = PatternFilter.PREFIXED
    operation = _operation(args.operation) if args.operation else None
    return AclFilter(
        principal=args.principal,
        resource_type=resource[0] if resource else None,
        pattern_type=pattern,
        name=resource[1] if resource else None,
        operation=operation,
        host=args.host,
        permission=_permission(args),
    )


def _cmd_remove(args: argparse.Namespace, target: _Target) -> int:
    if not (args.principal or _resource(args, required=False)):
        raise _Usage("remove needs --principal or a resource (refusing to match every rule)")
    flt = _filter(args, PatternFilter.LITERAL)
    if args.dry_run:
        matching = target.store.list(flt)
        for rule in matching:
            print(f"would remove: {rule}")
        print(f"{len(matching)} rule(s) would be removed")
        return OK
    removed = target.store.remove(flt, _actor(args))
    for rule in removed:
        print(f"removed: {rule}")
    print(f"{len(removed)} rule(s) removed")
    if removed:
        _notify(target)
    return OK


def _cmd_list(args: argparse.Namespace, target: _Target) -> int:
    flt = _filter(args, PatternFilter.ANY)
    rows = [
        (
            str(line),
            rule.permission.name,
            rule.principal,
            rule.operation.name,
            rule.resource_type.name,
            rule.pattern_type.name,
            rule.name,
            rule.host,
        )
        for line, rule in target.store.located(flt)
    ]
    header = ("LINE", "PERMISSION", "PRINCIPAL", "OPERATION", "RESOURCE", "PATTERN", "NAME", "HOST")
    _table([header, *rows])
    print(f"{len(rows)} rule(s)")
    return OK


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _cmd_lint(args: argparse.Namespace, target: _Target) -> int:
    store = target.store
    text = None
    if args.file:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            raise _Usage(f"cannot read {args.file}: {exc.strerror}") from None
    problems = store.problems(text)
    for problem in problems:
        print(problem)
    model_ok = True
    try:
        load_model(store.read().model_text)
    except ModelError as exc:
        print(f"{store.model_path}: error: {exc}")
        model_ok = False
    if not problems and model_ok:
        policy = parse_policy(text, args.file) if text is not None else store.read().policy
        print(
            f"{args.file or store.policy_path}: ok "
            f"({len(policy.rules)} rules, {len(policy.members)} role memberships)"
        )
    failed = not model_ok or errors(problems) or (args.strict and problems)
    return REFUSED if failed else OK


def _cmd_explain(args: argparse.Namespace, target: _Target) -> int:
    resource = _resource(args, required=True)
    assert resource is not None
    rtype, name = resource
    operation = _operation(args.operation)
    authorizer = Authorizer(target.store, super_users=target.super_users, cache_size=0)
    host = args.host or ""
    decision = authorizer.explain(args.principal, host, rtype, name, operation)
    verdict = "ALLOWED" if decision.allowed else "DENIED"
    source = f" from host {host}" if host else " (no --host: only rules for any host apply)"
    print(f"{verdict}: {args.principal} {operation.name} {rtype.name} {name!r}{source}")
    where = ""
    if decision.acl is not None:
        lines = [line for line, rule in target.store.located() if rule == decision.acl]
        if lines:
            where = f"  ({target.store.policy_path} line {lines[0]})"
    print(f"  rule:  {decision.rule}{where}")
    roles = authorizer.policy.graph.ancestors(args.principal)
    print(f"  roles: {', '.join(roles) if roles else '(none)'}")
    return OK


def _cmd_role(args: argparse.Namespace, target: _Target) -> int:
    store = target.store
    if args.role_command == "list":
        roles = store.roles()
        for role, members in roles.items():
            print(f"{role}: {', '.join(members)}")
        if not roles:
            print("no role memberships")
        return OK
    if args.role_command == "add":
        changed = store.add_role_member(args.member, args.role, _actor(args))
        print(f"{'added' if changed else 'already present'}: {args.member} in {args.role}")
    else:
        changed = store.remove_role_member(args.member, args.role, _actor(args))
        print(f"{'removed' if changed else 'not present'}: {args.member} in {args.role}")
    if changed:
        _notify(target)
    return OK


def _cmd_init(args: argparse.Namespace, target: _Target) -> int:
    store = target.store
    store.directory.mkdir(parents=True, exist_ok=True)
    for path, text in ((store.model_path, MODEL_CONF), (store.policy_path, _EMPTY_POLICY)):
        if path.exists():
            print(f"kept existing {path}")
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return OK


_EMPTY_POLICY = """\
# Nothing is allowed until a rule allows it (super users excepted). Format:
#   p, principal, resource type, LITERAL|PREFIXED, name, operation, host, allow|deny
#   g, member, role
"""

_COMMANDS = {
    "add": _cmd_add,
    "remove": _cmd_remove,
    "list": _cmd_list,
    "lint": _cmd_lint,
    "explain": _cmd_explain,
    "role": _cmd_role,
    "init": _cmd_init,
}


def _changes(args: argparse.Namespace) -> bool:
    """Whether the command may change the policy (and so is recorded in the audit trail)."""
    if args.policy_command == "role":
        return bool(args.role_command in ("add", "remove"))
    return args.policy_command == "add" or (args.policy_command == "remove" and not args.dry_run)


def _cmd_policy(args: argparse.Namespace) -> int:
    try:
        target = _target(args)
        if not _changes(args):
            return _COMMANDS[args.policy_command](args, target)
        recorder = ChangeRecorder.for_command(args, target.config)
        audit_policy_store(target.store, recorder)
        return recorder.finish(_COMMANDS[args.policy_command](args, target))
    except (_Usage, AuditError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        return USAGE
    except (PolicyError, InvalidRuleError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        return REFUSED


# -- argument parsing -------------------------------------------------------------


def _where(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--policy-dir", help="the policy directory (default: policies)")
    group.add_argument("--config", help="the gateway's YAML configuration (its authorization)")


def _resource_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", metavar="NAME")
    parser.add_argument("--group", metavar="NAME")
    parser.add_argument("--cluster", action="store_true", help=f"the cluster ({CLUSTER_NAME})")
    parser.add_argument("--transactional-id", metavar="ID")
    parser.add_argument("--delegation-token", metavar="ID")


def _filter_args(parser: argparse.ArgumentParser, what: str) -> None:
    _resource_args(parser)
    parser.add_argument("--principal", help=f"only {what} rules for this principal")
    parser.add_argument("--operation", help=f"only {what} rules for this operation")
    parser.add_argument("--host", help=f"only {what} rules for exactly this host")
    parser.add_argument(
        "--pattern",
        choices=["literal", "prefixed", "match", "any"],
        help="how the resource name selects rules (match: every rule that applies to it)",
    )
    parser.add_argument("--prefixed", action="store_true", help="same as --pattern prefixed")
    permission = parser.add_mutually_exclusive_group()
    permission.add_argument("--allow", action="store_true", help="only ALLOW rules")
    permission.add_argument("--deny", action="store_true", help="only DENY rules")


def register(commands: Any) -> None:
    policy = commands.add_parser("policy", help="authorization policies: add, remove, list, lint")
    sub = policy.add_subparsers(dest="policy_command", required=True)

    add = sub.add_parser("add", help="add rules (every principal x operation x host)")
    _where(add)
    add.add_argument("--principal", action="append", required=True, help="User:alice, Role:x")
    add.add_argument("--operation", action="append", required=True, help="READ, WRITE, ALL, ...")
    _resource_args(add)
    add.add_argument("--prefixed", action="store_true", help="the name is a prefix")
    add.add_argument("--host", action="append", help="an address or CIDR (default: any host)")
    add.add_argument("--deny", action="store_true", help="a DENY rule (default: ALLOW)")
    add.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(add)

    remove = sub.add_parser("remove", help="remove the rules a filter selects")
    _where(remove)
    _filter_args(remove, "remove")
    remove.add_argument("--dry-run", action="store_true", help="show, do not remove")
    remove.add_argument("--actor")
    add_audit_args(remove)

    listing = sub.add_parser("list", help="list rules, with their line numbers")
    _where(listing)
    _filter_args(listing, "list")

    lint = sub.add_parser("lint", help="check the policy; exit 1 on errors")
    _where(lint)
    lint.add_argument("--file", help="lint this file instead (e.g. before installing it)")
    lint.add_argument("--strict", action="store_true", help="warnings fail too")

    explain = sub.add_parser("explain", help="the decision for one request, and why")
    _where(explain)
    explain.add_argument("--principal", required=True)
    explain.add_argument("--operation", required=True)
    _resource_args(explain)
    explain.add_argument("--host", help="the client's address (default: consider any-host rules)")

    role = sub.add_parser("role", help="role memberships: add, remove, list")
    role_sub = role.add_subparsers(dest="role_command", required=True)
    for name, text in (("add", "make MEMBER inherit ROLE's rules"), ("remove", "undo that")):
        cmd = role_sub.add_parser(name, help=text)
        _where(cmd)
        cmd.add_argument("--member", required=True, help="a principal or another role")
        cmd.add_argument("--role", required=True, help="e.g. Role:tenant-a")
        cmd.add_argument("--actor")
        add_audit_args(cmd)
    role_list = role_sub.add_parser("list", help="every role and its direct members")
    _where(role_list)

    init = sub.add_parser("init", help="create model.conf and an empty policy.csv")
    _where(init)
    policy.set_defaults(func=_cmd_policy)
