"""Opt-in response to findings: a policy maps detector and severity to an action.

The actions are ones the gateway already has, each applied through its audited admin
command (so the audit trail records it, and gateways are notified as for a human's
change): ``block_address`` adds DENY rules for ``User:*`` from the address on every
topic, group and the cluster (``kgw policy add --deny --host``); ``revoke_key``
revokes the API key the finding names (``kgw apikey revoke``); ``suspend_tenant``
suspends the finding's tenant (``kgw tenant suspend``). A block with ``expire_s`` is
remembered in a state file and lifted (``kgw policy remove``) once it expires.

:func:`plan` and :func:`expired` are pure; :class:`Responder` runs the commands
(or, in dry-run mode, only reports them).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .findings import Finding, severity_at_least
from .settings import ResponseConfig, ResponsePolicy, ResponseRule

log = logging.getLogger(__name__)
API_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
BLOCKED_RESOURCES = (("--topic", "*"), ("--group", "*"), ("--cluster", None))


@dataclass(frozen=True, slots=True)
class Action:
    kind: str  # block_address | revoke_key | suspend_tenant | unblock_address
    target: str  # the address, key id or tenant
    finding_id: str | None
    detector: str | None
    expires_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.kind,
            "target": self.target,
            "finding_id": self.finding_id,
            "detector": self.detector,
            "expires_at": self.expires_at,
        }


def _covered(value: str, protected: Iterable[str]) -> bool:
    for entry in protected:
        if value == entry:
            return True
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(value) in ipaddress.ip_network(entry, strict=False):
                return True
    return False


def _target(rule: ResponseRule, finding: Finding, policy: ResponsePolicy) -> str | None:
    if rule.action == "block_address":
        host = finding.client_host or (finding.entity if finding.entity_type == "address" else None)
        try:
            ipaddress.ip_address(host or "")
        except ValueError:
            return None
        return None if host is None or _covered(host, policy.never_block) else host
    if rule.action == "revoke_key":
        key = finding.evidence.get("api_key_id") or finding.principal
        if not isinstance(key, str) or not API_KEY.match(key) or key.startswith("User:"):
            return None  # only an API key id can be revoked
        return None if _covered(key, policy.never_revoke) else key
    tenant = finding.tenant
    return None if not tenant or _covered(tenant, policy.never_suspend) else tenant


def plan(
    findings: Iterable[Finding], policy: ResponsePolicy, now: float, done: Iterable[Action] = ()
) -> list[Action]:
    """The actions the policy asks for, first matching rule per finding; none twice,
    and none already in effect (``done``: the active blocks and earlier actions)."""
    seen = {(a.kind, a.target) for a in done}
    actions: list[Action] = []
    for finding in findings:
        for rule in policy.rules:
            if rule.detector not in ("*", finding.detector):
                continue
            if not severity_at_least(finding.severity, rule.min_severity):
                continue
            target = _target(rule, finding, policy)
            if target is None or (rule.action, target) in seen:
                continue
            seen.add((rule.action, target))
            expires = now + rule.expire_s if rule.expire_s is not None else None
            actions.append(Action(rule.action, target, finding.id, finding.detector, expires))
            break
    return actions


def expired(blocks: Iterable[Action], now: float) -> tuple[list[Action], list[Action]]:
    """(blocks still in force, ``unblock_address`` actions for those past their expiry)."""
    keep: list[Action] = []
    lift: list[Action] = []
    for block in blocks:
        if block.expires_at is not None and block.expires_at <= now:
            lift.append(Action("unblock_address", block.target, block.finding_id, block.detector))
        else:
            keep.append(block)
    return keep, lift


def commands(action: Action, gateway_config: Path, actor: str) -> list[list[str]]:
    """The ``kgw`` command lines that carry ``action`` out."""
    where = ["--config", str(gateway_config), "--actor", actor]
    if action.kind == "block_address":
        return [
            ["policy", "add", *where, "--principal", "User:*", "--operation", "ALL",
             flag, *([name] if name else []), "--host", action.target, "--deny"]
            for flag, name in BLOCKED_RESOURCES
        ]  # fmt: skip
    if action.kind == "unblock_address":
        return [
            ["policy", "remove", *where, "--principal", "User:*", "--host", action.target,
             "--deny", "--pattern", "any"]
        ]  # fmt: skip
    if action.kind == "revoke_key":
        return [["apikey", "revoke", *where, action.target]]
    if action.kind == "suspend_tenant":
        return [["tenant", "suspend", *where, action.target]]
    raise ValueError(f"unknown action {action.kind!r}")


Runner = Callable[[list[str]], tuple[int, str]]


def run_kgw(argv: list[str]) -> tuple[int, str]:
    """``kgw ARGV`` in this process: (exit code, what it printed)."""
    from ..cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0) if isinstance(exc.code, int) else 2
    return code, out.getvalue()


class Responder:
    """Applies a response policy to new findings; remembers temporary blocks in
    ``state`` (JSON) so that they are lifted on time across restarts."""

    def __init__(
        self, config: ResponseConfig, policy: ResponsePolicy, state: Path, runner: Runner = run_kgw
    ) -> None:
        self.config = config
        self.policy = policy
        self.state = state
        self.runner = runner
        self.active = self._read()

    def _read(self) -> list[Action]:
        try:
            items = json.loads(self.state.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            log.error("analytics.response_state_unreadable", extra={"error": str(exc)})
            return []
        return [
            Action(i["action"], i["target"], i["finding_id"], i["detector"], i["expires_at"])
            for i in items
        ]

    def _write(self) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps([a.to_json() for a in self.active], indent=1))
        os.replace(tmp, self.state)

    def respond(self, findings: Iterable[Finding], now: float) -> list[dict[str, Any]]:
        """Lift expired blocks, then act on ``findings``; one report per action."""
        keep, lift = expired(self.active, now)
        todo = lift + plan(findings, self.policy, now, keep)
        reports = []
        for action in todo:
            reports.append(self._apply(action))
            if self.config.dry_run:
                continue
            if action.kind == "unblock_address":
                keep = [a for a in keep if a.target != action.target or a.kind != "block_address"]
            elif reports[-1]["ok"]:
                keep.append(action)
        if not self.config.dry_run:
            self.active = keep
            self._write()
        return reports

    def _apply(self, action: Action) -> dict[str, Any]:
        report: dict[str, Any] = {**action.to_json(), "dry_run": self.config.dry_run}
        argvs = commands(action, self.config.gateway_config, self.config.actor)
        report["commands"] = [" ".join(["kgw", *argv]) for argv in argvs]
        if self.config.dry_run:
            report["ok"] = True
            log.warning("analytics.response_planned", extra={**action.to_json()})
            return report
        outputs = []
        ok = True
        for argv in argvs:
            code, output = self.runner(argv)
            outputs.append(output.strip())
            ok = ok and code == 0
        report["ok"], report["output"] = ok, outputs
        log.warning("analytics.response_applied", extra={**action.to_json(), "ok": ok})
        return report
