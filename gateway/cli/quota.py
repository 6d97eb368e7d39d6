"""``kgw quota set|delete|get|list|plan``: quota settings and plans, for operators.

Every command works on a store: the one the gateway's ``--config FILE`` names
(Redis when ``quotas.redis_url`` is set, else ``quotas.store_file``; its plans
count too), ``--redis-url URL``, or ``--file PATH`` (default ``quotas.json``).
Numbers take suffixes: ``k``/``M``/``G`` (x1000) and ``Ki``/``Mi``/``Gi`` (x1024).
Exit codes: 0 done, 1 refused (a bad value, the store unavailable), 2 bad usage.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..audit import AuditError, audit_quota_store
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..config import ConfigError, GatewayConfig, load_config
from ..quotas.model import InvalidQuotaError, QuotaKind, Resolver, Subject, Target, TargetType
from ..quotas.settings import PlanConfig, QuotaConfig
from ..quotas.store import FileQuotaStore, QuotaStore, RedisQuotaStore, StoreError, open_store
from ..redisurl import url_problem

OK, REFUSED, USAGE = 0, 1, 2
_TARGETS = (
    ("tenant", TargetType.TENANT),
    ("principal", TargetType.PRINCIPAL),
    ("api_key", TargetType.API_KEY),
    ("ip", TargetType.ADDRESS),
)
# option name -> store key
_VALUE_OPTIONS = {
    "produce_bytes": "produce_bytes",
    "produce_burst": "produce_bytes_burst",
    "fetch_bytes": "fetch_bytes",
    "fetch_burst": "fetch_bytes_burst",
    "requests": "requests",
    "requests_burst": "requests_burst",
    "mutations": "mutations",
    "mutations_burst": "mutations_burst",
    "max_connections": "max_connections",
    "connection_rate": "connection_rate",
}
_LICENCE_OPTIONS = (
    "max_topics",
    "max_partitions_per_topic",
    "max_total_partitions",
    "max_retention_ms",
)
_SUFFIXES = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "ki": 2**10, "mi": 2**20, "gi": 2**30}


class _Usage(Exception):
    """A command line that cannot be carried out; exit code 2."""


@dataclass(frozen=True, slots=True)
class _Where:
    store: QuotaStore
    config: QuotaConfig
    gateway: GatewayConfig | None = None


def _number(text: str) -> float:
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]i?)?[bB]?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 1048576, 1Mi, 500k)")
    return float(match.group(1)) * _SUFFIXES[(match.group(2) or "").lower()]


def _where(args: argparse.Namespace) -> _Where:
    if args.config:
        try:
            config = load_config(Path(args.config))
        except ConfigError as exc:
            raise _Usage(f"configuration error: {exc}") from None
        if config.quotas is None:
            raise _Usage(f"{args.config} has no quotas section")
        return _Where(open_store(config.quotas), config.quotas, config)
    if args.redis_url:
        try:  # validated: a password_file is read
            cfg = QuotaConfig(redis_url=args.redis_url, key_prefix=args.key_prefix)
        except ValidationError as exc:
            raise _Usage(f"--redis-url: {url_problem(exc)}") from None
        assert cfg.redis_url is not None
        return _Where(RedisQuotaStore(cfg.redis_url, args.key_prefix), cfg)
    path = Path(args.file or "quotas.json")
    return _Where(FileQuotaStore(path), QuotaConfig(store_file=path))


_actor = cli_actor


def _target(args: argparse.Namespace) -> Target:
    chosen = [Target(t, getattr(args, attr)) for attr, t in _TARGETS if getattr(args, attr)]
    if len(chosen) != 1:
        raise _Usage("name exactly one of --tenant, --principal, --api-key, --ip")
    return chosen[0]


def _fmt(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _values_line(values: dict[str, float]) -> str:
    return " ".join(f"{key}={_fmt(value)}" for key, value in sorted(values.items())) or "(none)"


def _given(args: argparse.Namespace) -> dict[str, float]:
    """The values on the command line; ``--burst S`` gives each rate S seconds of burst."""
    values = {
        key: float(getattr(args, option))
        for option, key in _VALUE_OPTIONS.items()
        if getattr(args, option) is not None
    }
    if args.burst is not None:
        for kind in QuotaKind:
            if kind.value in values:
                values.setdefault(kind.burst_key, values[kind.value] * args.burst)
    return values


def _cmd_set(args: argparse.Namespace, where: _Where) -> int:
    target = _target(args)
    values: dict[str, float | None] = dict(_given(args))
    for key in args.remove or []:
        values[key] = None
    if not values:
        raise _Usage("nothing to set: give a value (e.g. --produce-bytes 1Mi) or --remove KEY")
    after = where.store.set_values(target, values, _actor(args))
    print(f"{target}: {_values_line(after or {})}")
    return OK


def _cmd_delete(args: argparse.Namespace, where: _Where) -> int:
    target = _target(args)
    removed = where.store.remove_target(target, _actor(args))
    print(f"{target}: {'deleted' if removed else 'had no values'}")
    return OK


def _resolver(where: _Where) -> Resolver:
    cfg = where.config
    return Resolver(where.store.load(), cfg.plans, cfg.default_plan, cfg.default_burst_s)


def _cmd_get(args: argparse.Namespace, where: _Where) -> int:
    resolver = _resolver(where)
    named = [Target(t, getattr(args, attr)) for attr, t in _TARGETS if getattr(args, attr)]
    if not named:
        raise _Usage("name at least one of --tenant, --principal, --api-key, --ip")
    for target in named:
        print(f"{target}: {_values_line(dict(resolver.settings.quotas.get(target, {})))}")
    if args.tenant:
        plan = resolver.plan_for(args.tenant)
        print(f"plan of tenant {args.tenant}: {plan.name if plan else '(none)'}")
    if args.ip:
        return OK
    subject = Subject(args.principal or "-", args.api_key, args.tenant, "-")
    print("effective:")
    for kind in QuotaKind:
        limit = resolver.limit(subject, kind)
        text = (
            f"rate={_fmt(limit.rate)}/s burst={_fmt(limit.burst)} from {limit.source}"
            if limit
            else "unlimited"
        )
        print(f"  {kind.value}: {text}")
    return OK


def _cmd_list(args: argparse.Namespace, where: _Where) -> int:
    settings = where.store.load()
    for target in sorted(settings.quotas, key=str):
        print(f"{target}: {_values_line(dict(settings.quotas[target]))}")
    print(f"{len(settings.quotas)} target(s) with quotas")
    return OK


def _cmd_plan(args: argparse.Namespace, where: _Where) -> int:
    store, actor = where.store, _actor(args)
    if args.plan_command == "set":
        fields: dict[str, Any] = dict(_given(args))
        fields |= {o: int(getattr(args, o)) for o in _LICENCE_OPTIONS if getattr(args, o)}
        store.set_plan(args.name, PlanConfig.model_validate(fields), actor)
        print(f"plan {args.name}: {_values_line({k: float(v) for k, v in fields.items()})}")
    elif args.plan_command == "remove":
        store.set_plan(args.name, None, actor)
        print(f"plan {args.name}: removed from the store")
    elif args.plan_command == "assign":
        resolver = _resolver(where)
        if args.plan not in resolver.plans:
            known = ", ".join(sorted(resolver.plans)) or "none"
            print(f"kgw: unknown plan {args.plan!r} (known: {known})", file=sys.stderr)
            return REFUSED
        store.assign(args.tenant, args.plan, actor)
        print(f"tenant {args.tenant}: plan {args.plan}")
    elif args.plan_command == "unassign":
        store.assign(args.tenant, None, actor)
        print(f"tenant {args.tenant}: no plan of its own (default: {where.config.default_plan})")
    else:
        _plan_list(where)
    return OK


def _plan_list(where: _Where) -> None:
    settings = where.store.load()
    plans = {**{n: (p, "config") for n, p in where.config.plans.items()}}
    plans |= {n: (p, "store") for n, p in settings.plans.items()}
    for name, (plan, source) in sorted(plans.items()):
        default = " (default)" if name == where.config.default_plan else ""
        values = {k: float(v) for k, v in plan.model_dump(exclude_none=True).items()}
        print(f"{name}{default} [{source}]: {_values_line(values)}")
    for tenant, plan_name in sorted(settings.assignments.items()):
        print(f"tenant {tenant}: {plan_name}")
    print(f"{len(plans)} plan(s), {len(settings.assignments)} assignment(s)")


_COMMANDS = {
    "set": _cmd_set,
    "delete": _cmd_delete,
    "get": _cmd_get,
    "list": _cmd_list,
    "plan": _cmd_plan,
}


def _cmd_quota(args: argparse.Namespace) -> int:
    recorder: ChangeRecorder | None = None
    try:
        where = _where(args)
        if hasattr(args, "audit_trail"):  # a command that changes the store
            recorder = ChangeRecorder.for_command(args, where.gateway)
            audit_quota_store(where.store, recorder)
        code = _COMMANDS[args.quota_command](args, where)
    except (_Usage, AuditError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = USAGE
    except (InvalidQuotaError, StoreError) as exc:
        print(f"kgw: {exc}", file=sys.stderr)
        code = REFUSED
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"kgw: {problems}", file=sys.stderr)
        code = REFUSED
    return recorder.finish(code) if recorder is not None else code


# -- argument parsing -------------------------------------------------------------


def _store_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--config", help="the gateway's YAML configuration (its quotas section)")
    group.add_argument("--redis-url", help="the shared store in Redis")
    group.add_argument("--file", help="a JSON store for a single instance (default quotas.json)")
    parser.add_argument("--key-prefix", default="kgw:quota:", help="with --redis-url")


def _target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", metavar="T")
    parser.add_argument("--principal", metavar="P", help="e.g. User:alice")
    parser.add_argument("--api-key", metavar="K", help="an API key id")
    parser.add_argument("--ip", metavar="A", help="a client address (connection limits)")


def _value_args(parser: argparse.ArgumentParser) -> None:
    for option in _VALUE_OPTIONS:
        flag = "--" + option.replace("_", "-")
        unit = "per second" if "burst" not in option and option != "max_connections" else ""
        parser.add_argument(flag, type=_number, metavar="N", help=unit or None)
    parser.add_argument(
        "--burst",
        type=_number,
        metavar="S",
        help="give every rate above a burst of S seconds of it (unless its own is given)",
    )


def register(commands: Any) -> None:
    quota = commands.add_parser("quota", help="quotas, plans and licence limits")
    sub = quota.add_subparsers(dest="quota_command", required=True)

    setter = sub.add_parser("set", help="set (or --remove) values of one target")
    _store_args(setter)
    _target_args(setter)
    _value_args(setter)
    setter.add_argument("--remove", action="append", metavar="KEY", help="e.g. fetch_bytes")
    setter.add_argument("--actor", help="who makes the change (default: cli:<login>)")
    add_audit_args(setter)

    delete = sub.add_parser("delete", help="remove every value of one target")
    _store_args(delete)
    _target_args(delete)
    delete.add_argument("--actor")
    add_audit_args(delete)

    getter = sub.add_parser("get", help="a target's values and the quotas in effect")
    _store_args(getter)
    _target_args(getter)

    listing = sub.add_parser("list", help="every target with values")
    _store_args(listing)

    plan = sub.add_parser("plan", help="plans: set, remove, list, assign, unassign")
    plan_sub = plan.add_subparsers(dest="plan_command", required=True)
    plan_set = plan_sub.add_parser("set", help="create or replace a plan in the store")
    _store_args(plan_set)
    plan_set.add_argument("name")
    _value_args(plan_set)
    for option in _LICENCE_OPTIONS:
        plan_set.add_argument("--" + option.replace("_", "-"), type=_number, metavar="N")
    plan_set.add_argument("--actor")
    add_audit_args(plan_set)
    plan_remove = plan_sub.add_parser("remove", help="remove a plan from the store")
    _store_args(plan_remove)
    plan_remove.add_argument("name")
    plan_remove.add_argument("--actor")
    add_audit_args(plan_remove)
    plan_list = plan_sub.add_parser("list", help="plans (configured and stored), assignments")
    _store_args(plan_list)
    assign = plan_sub.add_parser("assign", help="put TENANT on PLAN")
    _store_args(assign)
    assign.add_argument("tenant")
    assign.add_argument("plan")
    assign.add_argument("--actor")
    add_audit_args(assign)
    unassign = plan_sub.add_parser("unassign", help="TENANT falls back to the default plan")
    _store_args(unassign)
    unassign.add_argument("tenant")
    unassign.add_argument("--actor")
    add_audit_args(unassign)
    quota.set_defaults(func=_cmd_quota)
