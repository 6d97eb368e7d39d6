"""Run one attack of the table at every version the gateway advertises to the attacker,
and judge each response (see scenarios.py for what is checked)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from gateway.protocol.apis import decodable_versions

from ..rawkafka import RawConnection
from .kafkamsg import error_codes, has_field, mentions, naming, request, walk
from .scenarios import Attack
from .snapshot import differences, snapshot
from .stack import Ctx, Stack, Tenant

UNSUPPORTED_VERSION = 35


@dataclass
class Outcome:
    versions: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    state: list[str] = field(default_factory=list)
    flagged: list[bool] = field(default_factory=list)  # per version: did the judge object?


def route(ctx: Ctx, where: str | None) -> int | None:
    if where is None:
        return None
    if where in ("vt", "vt2", "at"):
        topic = {"vt": ctx.vt, "vt2": ctx.vt2, "at": ctx.at}[where]
        return ctx.leaders[topic][0]
    if where in ("vg", "vcg", "ag", "acg"):
        return ctx.group_node[getattr(ctx, where)]
    return ctx.txn_node[getattr(ctx, where)]


def _named_values(body: Any, secrets: dict[Any, str]) -> set[Any]:
    """The names and ids in the request that are, or contain, a victim's identifier."""
    found = set()
    for _path, value in walk(body):
        named_id = isinstance(value, uuid.UUID) and value in secrets
        named_str = isinstance(value, str) and any(
            isinstance(s, str) and s in value for s in secrets
        )
        if named_id or named_str:
            found.add(value)
    return found


def judge(
    attack: Attack, ctx: Ctx, body: Any, answer: Any, raw: bytes, exact: bool = True
) -> list[str]:
    """What is wrong with the answer to one attack request (empty: nothing).

    ``exact``: the refusal must carry the codes the table names (the gateway decides).
    Otherwise (mode ``brokers``) any error code is a refusal — a broker may refuse for
    its own reason first (not the leader, invalid request, the licence) — and what
    must hold is the same: a refusal, no leak, the victim's state unchanged."""
    secrets = ctx.secrets()
    named = {key for key, _path in mentions(body, secrets)}
    problems = [
        f"leaks {secrets[key]} at {path}"
        for key, path in mentions(answer, secrets)
        if key not in named
    ]
    if ctx.marker.encode() in raw:
        problems.append("the victim's record content is in the response")
    if attack.own is not None:
        wanted = {name: "own" for name in attack.own(ctx)}
        seen = {key for key, _path in mentions(answer, wanted)}
        problems += [
            f"the attacker's own {name!r} is missing" for name in wanted if name not in seen
        ]
    if attack.check == "whole":
        codes = error_codes(answer)
        if exact:
            problems += [f"{path} = {code}" for path, code in codes if code not in attack.denied]
        elif codes and not any(code != 0 for _path, code in codes):
            problems.append(f"not refused: {codes[:5]}")
        if not codes and not attack.may_be_empty:
            problems.append("no error code at all")
    elif attack.check == "named":
        entries = naming(answer, _named_values(body, secrets))
        for path, entry in entries:
            codes = [(f"{path}{sub}", c) for sub, c in error_codes(entry)]
            if exact:
                problems += [f"{p} = {c}" for p, c in codes if c not in attack.denied]
            elif not any(c != 0 for _p, c in codes):
                problems.append(f"{path}: not refused ({codes[:5]})")
        if not entries or not any(error_codes(entry) for _p, entry in entries):
            problems.append("no error code on an entry naming the victim's resource")
    return problems


async def refused_unadvertised(stack: Stack, attack: Attack) -> list[str]:
    """An API the gateway does not offer the attacker, sent anyway at the lowest version
    kio knows: it must be refused (UNSUPPORTED_VERSION everywhere, or the connection
    closed) without reaching a broker, and leak nothing."""
    ctx = stack.ctx
    assert ctx is not None
    version = min(decodable_versions(attack.api))
    body = request(attack.api, version, attack.template(ctx))
    conn = await stack.connect(stack.attacker, route(ctx, attack.route))
    try:
        answer, raw = await conn.call(body, timeout_s=20)
    except (asyncio.IncompleteReadError, ConnectionError):
        return []  # closed: refused
    finally:
        conn.close()
    codes = error_codes(answer)
    problems = [f"{path} = {code}" for path, code in codes if code != UNSUPPORTED_VERSION]
    if not codes:
        problems.append("no UNSUPPORTED_VERSION in the answer")
    secrets = ctx.secrets()
    named = {key for key, _path in mentions(body, secrets)}  # echoed names are no leak
    problems += [
        f"leaks {secrets[key]} at {path}"
        for key, path in mentions(answer, secrets)
        if key not in named
    ]
    if ctx.marker.encode() in raw:
        problems.append("the victim's record content is in the response")
    return problems


async def run(
    stack: Stack,
    attack: Attack,
    advertised: dict[int, tuple[int, int]],
    tenant: Tenant | None = None,
) -> Outcome:
    """The attack at every advertised version, as the attacker (or, for the suite's
    control, as ``tenant``); the victim's state is compared only for the attacker."""
    ctx = stack.ctx
    assert ctx is not None
    outcome = Outcome()
    if attack.api not in advertised:
        return outcome
    low, high = advertised[attack.api]
    sender = tenant or stack.attacker
    before = await snapshot(stack, ctx) if tenant is None else None
    node = route(ctx, attack.route)
    conn: RawConnection | None = None
    try:
        for version in range(low, high + 1):
            if version < attack.low or (
                attack.needs and not has_field(attack.api, version, attack.needs)
            ):
                continue
            body = request(attack.api, version, attack.template(ctx))
            outcome.versions.append(version)
            if conn is None:
                conn = await stack.connect(sender, node)
            try:
                answer, raw = await conn.call(body, timeout_s=20)
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError) as exc:
                outcome.problems.append(f"v{version}: no answer ({type(exc).__name__})")
                outcome.flagged.append(True)
                conn.close()
                conn = None
                continue
            found = judge(attack, ctx, body, answer, raw, exact=stack.mode == "gateway")
            outcome.problems += [f"v{version}: {p}" for p in found]
            outcome.flagged.append(bool(found))
    finally:
        if conn is not None:
            conn.close()
    if before is not None:
        outcome.state = differences(before, await snapshot(stack, ctx))
    return outcome
