"""The rules and role memberships, kept in the policy directory's casbin files.

One ``PolicyStore`` is shared by the gateway (its engine and the Kafka ACL APIs)
and by ``kgw policy``. Changes are made under an exclusive file lock, linted as a
whole before anything is written, and written atomically (temporary file, fsync,
rename), so a watcher never sees half a file and a change that would break the
policy is refused. Comments and blank lines survive every change.

Every change names its ``actor``; hooks (``add_hook``) receive a ``PolicyChange``
with what was added and removed and the file digests before and after, for the
audit trail.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from ..fileutil import write_atomically
from .lint import Problem, errors, lint
from .model import AclFilter, AclRule, InvalidRuleError, principal_problem, rule_problems
from .policyfile import (
    Membership,
    ParsedPolicy,
    format_membership,
    format_rule,
    parse_policy,
)

log = logging.getLogger("kgw.authz")
RACY_S = 2.0  # a file modified this recently is re-read even when its stat looks unchanged


class PolicyError(Exception):
    """The policy files cannot be used; ``problems`` lists why (errors only)."""

    def __init__(self, message: str, problems: Iterable[Problem] = ()) -> None:
        self.problems = list(problems)
        details = "; ".join(str(p) for p in self.problems)
        super().__init__(f"{message}: {details}" if details else message)


@dataclass(frozen=True, slots=True)
class PolicyFiles:
    """What the policy directory held at one moment."""

    model_text: str
    policy: ParsedPolicy
    digest: str  # sha256 over both files


@dataclass(frozen=True, slots=True)
class PolicyChange:
    """One attributable change, handed to every hook after it is written."""

    actor: str
    action: str  # add | remove | add_role_member | remove_role_member
    added: tuple[AclRule, ...] = ()
    removed: tuple[AclRule, ...] = ()
    members_added: tuple[Membership, ...] = ()
    members_removed: tuple[Membership, ...] = ()
    before_sha256: str = ""
    after_sha256: str = ""
    at: float = field(default_factory=time.time)


ChangeHook = Callable[[PolicyChange], None]
Rules = list[AclRule]
_T = TypeVar("_T")
_Signature = tuple[tuple[int, int, int, int], tuple[int, int, int, int]]


class PolicyStore:
    def __init__(
        self,
        directory: Path | str,
        *,
        model_file: str = "model.conf",
        policy_file: str = "policy.csv",
        super_users: Iterable[str] = (),
    ) -> None:
        self.directory = Path(directory)
        self.model_path = self.directory / model_file
        self.policy_path = self.directory / policy_file
        self.super_users = tuple(super_users)
        self._hooks: list[ChangeHook] = []
        self._lock = threading.RLock()
        self._cached: PolicyFiles | None = None
        self._signature: _Signature | None = None
        self._read_at = 0.0

    # -- reading ---------------------------------------------------------------

    def read(self, *, fresh: bool = False) -> PolicyFiles:
        """The files' content; re-read only when their stat changed (or recently could have).

        ``PolicyError`` when a file cannot be read.
        """
        with self._lock:
            try:
                signature = (_stat(self.model_path), _stat(self.policy_path))
            except OSError as exc:
                raise PolicyError(
                    f"cannot read the policy: {exc.strerror}: {exc.filename}"
                ) from None
            cached = self._cached
            if (
                not fresh
                and cached is not None
                and signature == self._signature
                and max(signature[0][0], signature[1][0]) / 1e9 < self._read_at - RACY_S
            ):
                return cached
            read_at = time.time()
            try:
                model_text = self.model_path.read_text(encoding="utf-8")
                policy_text = self.policy_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise PolicyError(f"cannot read the policy: {exc}") from None
            if cached is not None and (cached.model_text, cached.policy.text) == (
                model_text,
                policy_text,
            ):
                files = cached
            else:
                digest = hashlib.sha256(
                    model_text.encode() + b"\0" + policy_text.encode()
                ).hexdigest()
                parsed = parse_policy(policy_text, self.policy_path.name)
                files = PolicyFiles(model_text, parsed, digest)
            self._cached, self._signature, self._read_at = files, signature, read_at
            return files

    def list(self, flt: AclFilter | None = None) -> Rules:
        """The rules in file order (each once) that ``flt`` selects (all without one)."""
        return _unique(rule for _, rule in self.located(flt))

    def located(self, flt: AclFilter | None = None) -> builtins.list[tuple[int, AclRule]]:
        """Like ``list`` but with line numbers, duplicates included."""
        rules = self.read().policy.rules
        return [(line, rule) for line, rule in rules if flt is None or flt.matches(rule)]

    def memberships(self) -> builtins.list[Membership]:
        return _unique(m for _, m in self.read().policy.members)

    def roles(self) -> dict[str, builtins.list[str]]:
        """Each role and its direct members, in file order."""
        roles: dict[str, builtins.list[str]] = {}
        for membership in self.memberships():
            roles.setdefault(membership.role, []).append(membership.member)
        return roles

    def problems(self, text: str | None = None, *, warnings: bool = True) -> builtins.list[Problem]:
        """Lint ``text`` (the current policy file without it)."""
        parsed = (
            self.read(fresh=True).policy
            if text is None
            else parse_policy(text, self.policy_path.name)
        )
        return lint(parsed, self.super_users, warnings=warnings)

    def lint(self, text: str | None = None) -> builtins.list[str]:
        """Every problem as ``file:line: severity: message``; errors make a policy unusable."""
        return [str(problem) for problem in self.problems(text)]

    # -- changing --------------------------------------------------------------

    def add_hook(self, hook: ChangeHook) -> None:
        """Call ``hook`` after every change this store writes (exceptions are logged)."""
        self._hooks.append(hook)

    def add(self, rules: Iterable[AclRule], actor: str) -> Rules:
        """Add ``rules``; returns those not there yet. ``InvalidRuleError`` if one is bad."""
        wanted = _unique(rules)
        for rule in wanted:
            problems = rule_problems(rule)
            if problems:
                raise InvalidRuleError(f"{rule}: " + "; ".join(problems))
        with self._changing() as files:
            present = {rule for _, rule in files.policy.rules}
            new = [rule for rule in wanted if rule not in present]
            if not new:
                return []
            text = _append(files.policy.text, [format_rule(rule) for rule in new])
            change = self._commit(files, text, PolicyChange(actor, "add", added=tuple(new)))
        self._announce(change)
        return new

    def remove(self, flt: AclFilter, actor: str) -> Rules:
        """Remove every rule ``flt`` selects; returns them (each once)."""
        with self._changing() as files:
            doomed = {line for line, rule in files.policy.rules if flt.matches(rule)}
            if not doomed:
                return []
            removed = _unique(rule for line, rule in files.policy.rules if line in doomed)
            text = _drop_lines(files.policy.text, doomed)
            change = self._commit(
                files, text, PolicyChange(actor, "remove", removed=tuple(removed))
            )
        self._announce(change)
        return removed

    def add_role_member(self, member: str, role: str, actor: str) -> bool:
        """Make ``member`` (a principal or another role) inherit ``role``'s rules."""
        membership = Membership(member, role)
        for principal in (member, role):
            problem = principal_problem(principal)
            if problem:
                raise InvalidRuleError(problem)
        with self._changing() as files:
            if any(m == membership for _, m in files.policy.members):
                return False
            text = _append(files.policy.text, [format_membership(membership)])
            change = PolicyChange(actor, "add_role_member", members_added=(membership,))
            change = self._commit(files, text, change)
        self._announce(change)
        return True

    def remove_role_member(self, member: str, role: str, actor: str) -> bool:
        membership = Membership(member, role)
        with self._changing() as files:
            doomed = {line for line, m in files.policy.members if m == membership}
            if not doomed:
                return False
            text = _drop_lines(files.policy.text, doomed)
            change = PolicyChange(actor, "remove_role_member", members_removed=(membership,))
            change = self._commit(files, text, change)
        self._announce(change)
        return True

    @contextlib.contextmanager
    def _changing(self) -> Iterator[PolicyFiles]:
        """Hold the store's lock (threads) and the directory's lock file (processes)."""
        with self._lock:
            lock_path = self.directory / f".{self.policy_path.name}.lock"
            with open(lock_path, "a+b") as lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)
                try:
                    yield self.read(fresh=True)
                finally:
                    fcntl.flock(lock_file, fcntl.LOCK_UN)

    def _commit(self, before: PolicyFiles, text: str, change: PolicyChange) -> PolicyChange:
        problems = errors(lint(parse_policy(text, self.policy_path.name), warnings=False))
        if problems:
            raise PolicyError("refusing to write a policy with errors", problems)
        _write_atomically(self.policy_path, text)
        after = self.read(fresh=True)
        return replace(change, before_sha256=before.policy.sha256, after_sha256=after.policy.sha256)

    def _announce(self, change: PolicyChange) -> None:
        """Log the change and run the hooks, with no lock held."""
        log.info(
            "policy changed by %s: %s",
            change.actor,
            change.action,
            extra={"event": "policy_changed", "path": str(self.policy_path)},
        )
        for hook in list(self._hooks):
            try:
                hook(change)
            except Exception:
                log.exception("policy change hook failed", extra={"event": "policy_hook_failed"})


def _stat(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def _unique(items: Iterable[_T]) -> list[_T]:
    return list(dict.fromkeys(items))


def _append(text: str, lines: list[str]) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + "".join(f"{line}\n" for line in lines)


def _drop_lines(text: str, numbers: set[int]) -> str:
    lines = text.split("\n")
    return "\n".join(line for number, line in enumerate(lines, start=1) if number not in numbers)


def _write_atomically(path: Path, text: str) -> None:
    write_atomically(path, text)
