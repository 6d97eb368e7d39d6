"""What is wrong with a policy, in words a security admin can act on.

Errors make a policy unusable: the gateway keeps its last good policy and the
store refuses to write one. Warnings (duplicates, shadowed rules, dangling roles,
rules that can never apply) are reported by ``kgw policy lint`` and change nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from .model import (
    ANY_HOST,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclRule,
    PatternType,
    Permission,
    ResourceType,
    denied_operations,
    granted_operations,
    parse_host,
    principal_problem,
    rule_problems,
    rule_warnings,
)
from .policyfile import Membership, ParsedPolicy

# casbin's role manager follows at most 10 names (the principal and 9 roles above it).
MAX_ROLE_LINKS = 9
Severity = Literal["error", "warning"]
Add = Callable[[Severity, str, "int | None"], None]


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity
    message: str
    line: int | None = None
    source: str = ""

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return (
            f"{where}: {self.severity}: {self.message}"
            if where
            else (f"{self.severity}: {self.message}")
        )


class RoleGraph:
    """Role memberships (``g`` lines): who inherits whose rules."""

    def __init__(self, members: Iterable[Membership]) -> None:
        self.parents: dict[str, list[str]] = defaultdict(list)
        self.children: dict[str, list[str]] = defaultdict(list)
        for membership in members:
            if membership.role not in self.parents[membership.member]:
                self.parents[membership.member].append(membership.role)
                self.children[membership.role].append(membership.member)

    def ancestors(self, principal: str, limit: int = MAX_ROLE_LINKS) -> list[str]:
        """The roles ``principal`` inherits, nearest first, as far as casbin follows them."""
        found: list[str] = []
        frontier = [principal]
        for _ in range(limit):
            nxt = []
            for name in frontier:
                for role in self.parents.get(name, ()):
                    if role not in found and role != principal:
                        found.append(role)
                        nxt.append(role)
            if not nxt:
                break
            frontier = nxt
        return found

    def cycle_from(self, start: str) -> list[str] | None:
        """A membership cycle through ``start``, if there is one."""
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            name, path = stack.pop()
            for role in self.parents.get(name, ()):
                if role == start:
                    return [*path, start]
                if role not in seen:
                    seen.add(role)
                    stack.append((role, [*path, role]))
        return None

    def depth(self, principal: str) -> int:
        """The longest chain of memberships above ``principal`` (the graph must be acyclic)."""
        memo: dict[str, int] = {}

        def longest(name: str) -> int:
            if name not in memo:
                memo[name] = 0
                memo[name] = max((1 + longest(r) for r in self.parents.get(name, ())), default=0)
            return memo[name]

        return longest(principal)


def lint(
    parsed: ParsedPolicy, super_users: Iterable[str] = (), warnings: bool = True
) -> list[Problem]:
    """Every problem in ``parsed``, errors first within each line order."""
    problems: list[Problem] = []

    def add(severity: Severity, message: str, line: int | None) -> None:
        problems.append(Problem(severity, message, line, parsed.source))

    for line, message in parsed.bad_lines:
        add("error", message, line)
    for line, rule in parsed.rules:
        for message in rule_problems(rule):
            add("error", message, line)
    for line, membership in parsed.members:
        for message in _membership_problems(membership):
            add("error", message, line)
    graph = RoleGraph(m for _, m in parsed.members if not _membership_problems(m))
    _role_structure(parsed, graph, add)
    if warnings:
        for line, rule in parsed.rules:
            for message in rule_warnings(rule):
                add("warning", message, line)
        _duplicates(parsed, add)
        _dangling_roles(parsed, graph, add)
        _shadowed(parsed, graph, add)
        supers = set(super_users)
        for line, rule in parsed.rules:
            if rule.principal in supers and rule.permission is Permission.DENY:
                add("warning", f"{rule.principal} is a super user: DENY rules do not apply", line)
    problems.sort(key=lambda p: (p.line or 0, p.severity != "error"))
    return problems


def errors(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def _membership_problems(membership: Membership) -> list[str]:
    found = []
    for what, principal in (("member", membership.member), ("role", membership.role)):
        problem = principal_problem(principal)
        if problem:
            found.append(f"{what}: {problem}")
        elif principal.split(":", 1)[1] == WILDCARD:
            found.append(f"{what} {principal!r}: a wildcard cannot be in a role; grant to it")
    if membership.member == membership.role:
        found.append(f"{membership.member} cannot be a member of itself")
    return found


def _role_structure(parsed: ParsedPolicy, graph: RoleGraph, add: Add) -> None:
    reported: set[frozenset[str]] = set()
    for line, membership in parsed.members:
        cycle = graph.cycle_from(membership.member)
        if cycle is not None:
            key = frozenset(cycle)
            if key not in reported:
                reported.add(key)
                add("error", "role memberships form a cycle: " + " -> ".join(cycle), line)
    if reported:
        return
    for line, membership in parsed.members:
        depth = graph.depth(membership.member)
        if depth > MAX_ROLE_LINKS and not graph.children.get(membership.member):
            add(
                "error",
                f"{membership.member} sits {depth} roles deep; casbin follows at most "
                f"{MAX_ROLE_LINKS}, so the top roles would silently not apply",
                line,
            )


def _duplicates(parsed: ParsedPolicy, add: Add) -> None:
    first: dict[AclRule | Membership, int] = {}
    items: list[tuple[int, AclRule | Membership]] = [*parsed.rules, *parsed.members]
    for line, item in items:
        if item in first:
            add("warning", f"duplicate of line {first[item]}", line)
        else:
            first[item] = line


def _dangling_roles(parsed: ParsedPolicy, graph: RoleGraph, add: Add) -> None:
    granted = {rule.principal for _, rule in parsed.rules}
    for line, rule in parsed.rules:
        kind = rule.principal.split(":", 1)[0]
        if kind == "Role" and not graph.children.get(rule.principal):
            add("warning", f"rule for {rule.principal}, which has no members", line)
    reported: set[str] = set()
    for line, membership in parsed.members:
        role = membership.role
        if role in reported or _membership_problems(membership):
            continue
        lineage = [role, *graph.ancestors(role)]
        if not any(name in granted for name in lineage):
            reported.add(role)
            add(
                "warning",
                f"{role} has members but no rule grants it (or its parents) anything",
                line,
            )


def _host_covers(outer: str, inner: str) -> bool:
    if outer in (ANY_HOST, inner):
        return True
    if inner == ANY_HOST:
        return False
    try:
        outer_net, inner_net = parse_host(outer), parse_host(inner)
    except ValueError:
        return False
    if outer_net is None or inner_net is None or outer_net.version != inner_net.version:
        return False
    return inner_net.subnet_of(outer_net)  # type: ignore[arg-type]


def _resource_covers(outer: AclRule, inner: AclRule) -> bool:
    if outer.resource_type is not inner.resource_type:
        return False
    if outer.pattern_type is PatternType.LITERAL:
        if outer.name == WILDCARD:
            return True
        return inner.pattern_type is PatternType.LITERAL and inner.name == outer.name
    if inner.pattern_type is PatternType.LITERAL and inner.name == WILDCARD:
        return False
    return inner.name.startswith(outer.name)


def _effect(rule: AclRule) -> frozenset[object]:
    if rule.permission is Permission.ALLOW:
        return frozenset(granted_operations(rule.operation))
    return frozenset(denied_operations(rule.operation))


def covers(outer: AclRule, inner: AclRule, graph: RoleGraph) -> bool:
    """Whenever ``inner`` applies, ``outer`` applies too, to at least the same operations."""
    if outer.principal not in (inner.principal, WILDCARD_PRINCIPAL) and (
        outer.principal not in graph.ancestors(inner.principal)
    ):
        return False
    if not _host_covers(outer.host, inner.host) or not _resource_covers(outer, inner):
        return False
    return _effect(inner) <= _effect(outer)


class _TypeIndex:
    """A resource type's rules by pattern, to find the rules that may cover a rule."""

    def __init__(self) -> None:
        self.wildcard: list[int] = []
        self.literal: dict[str, list[int]] = defaultdict(list)
        self.prefixed: dict[str, list[int]] = defaultdict(list)
        self._lengths: list[int] | None = None

    def add(self, position: int, rule: AclRule) -> None:
        self._lengths = None
        if rule.pattern_type is PatternType.PREFIXED:
            self.prefixed[rule.name].append(position)
        elif rule.name == WILDCARD:
            self.wildcard.append(position)
        else:
            self.literal[rule.name].append(position)

    def covering(self, rule: AclRule) -> list[int]:
        positions = list(self.wildcard)
        if rule.pattern_type is PatternType.LITERAL:
            if rule.name == WILDCARD:
                return positions
            positions += self.literal.get(rule.name, ())
        if self._lengths is None:
            self._lengths = sorted({len(prefix) for prefix in self.prefixed})
        for length in self._lengths:
            positions += self.prefixed.get(rule.name[:length], ())
        return sorted(set(positions))


def _shadowed(parsed: ParsedPolicy, graph: RoleGraph, add: Add) -> None:
    rules = [(line, rule) for line, rule in parsed.rules if not rule_problems(rule)]
    index: dict[ResourceType, _TypeIndex] = defaultdict(_TypeIndex)
    for position, (_, rule) in enumerate(rules):
        index[rule.resource_type].add(position, rule)
    seen: set[AclRule] = set()
    for line, rule in rules:
        if rule in seen:
            continue  # a duplicate, reported as such
        seen.add(rule)
        for position in index[rule.resource_type].covering(rule):
            other_line, other = rules[position]
            if other == rule or not covers(other, rule, graph):
                continue
            if covers(rule, other, graph) and other_line > line:
                continue  # equivalent rules: report the later one only
            message = _shadow_message(rule, other, other_line)
            if message:
                add("warning", message, line)
                break


def _shadow_message(rule: AclRule, other: AclRule, other_line: int) -> str | None:
    if rule.permission is Permission.ALLOW and other.permission is Permission.ALLOW:
        return f"redundant: line {other_line} already allows everything this rule allows"
    if rule.permission is Permission.ALLOW:
        return f"never takes effect: line {other_line} denies everything this rule allows"
    if other.permission is Permission.DENY:
        return f"redundant: line {other_line} already denies everything this rule denies"
    return None
