"""The casbin side: the model, the matcher's functions, and one compiled policy.

The model (``policies/model.conf``, a copy of ``MODEL_CONF``) states Kafka's ACL
semantics; casbin evaluates it. ``CompiledPolicy`` hands casbin only the rules
that can apply to a request (same resource type, a name pattern that matches, a
principal that is the requester, one of its roles or ``User:*``) with DENY rules
first, so casbin's first matching rule is the one that decides and the rule it
explains with is the one to report. Nothing here does I/O.
"""

from __future__ import annotations

import functools
import ipaddress
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import casbin
from casbin.effect import Effector
from casbin.persist.adapter import Adapter

from .lint import RoleGraph
from .model import (
    ANY_HOST,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclRule,
    Operation,
    Permission,
    ResourceType,
    denied_operations,
    granted_operations,
    parse_host,
)
from .policyfile import Membership, casbin_row

MODEL_CONF = """\
# KaaS Gateway authorization model: Apache Kafka's ACL semantics, evaluated by casbin.
# Do not edit unless you know why: the gateway checks that the request and policy
# definitions and the policy effect are exactly these.

[request_definition]
# principal, client address, resource type, resource name, operation
r = sub, host, rtype, name, op

[policy_definition]
# principal or role, resource type, LITERAL|PREFIXED, name, operation, host, allow|deny
p = sub, rtype, pattern, name, op, host, eft

[role_definition]
# g, member, role: the member inherits the role's rules (roles may nest)
g = _, _

[policy_effect]
# allowed when some allow rule matches and no deny rule does: deny wins, deny by default
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
# resourceMatch: LITERAL name, LITERAL '*' (any name) or PREFIXED
# User:* matches every principal; g() follows role memberships
# opMatch: ALL matches all; an allow of READ/WRITE/DELETE/ALTER also allows DESCRIBE,
#          an allow of ALTER_CONFIGS also allows DESCRIBE_CONFIGS; a deny denies only its own
# hostMatch: '*', an exact address, or a CIDR block (IPv4 or IPv6)
m = r.rtype == p.rtype && resourceMatch(r.name, p.pattern, p.name) \\
    && (p.sub == "User:*" || g(r.sub, p.sub)) \\
    && opMatch(r.op, p.op, p.eft) && hostMatch(r.host, p.host)
"""

REQUEST_TOKENS = ["r_sub", "r_host", "r_rtype", "r_name", "r_op"]
POLICY_TOKENS = ["p_sub", "p_rtype", "p_pattern", "p_name", "p_op", "p_host", "p_eft"]
DENY_OVERRIDE = "some(where (p.eft == allow)) && !some(where (p.eft == deny))"
Row = tuple[str, ...]


# -- the matcher's functions ----------------------------------------------------


def resource_match(request_name: str, pattern: str, rule_name: str) -> bool:
    if pattern == "LITERAL":
        return rule_name in (request_name, WILDCARD)
    return pattern == "PREFIXED" and request_name.startswith(rule_name)


_ALLOWS = {op.name: frozenset(o.name for o in granted_operations(op)) for op in Operation}
_DENIES = {op.name: frozenset(o.name for o in denied_operations(op)) for op in Operation}


def op_match(request_op: str, rule_op: str, effect: str) -> bool:
    table = _ALLOWS if effect == "allow" else _DENIES
    ops = table.get(rule_op)
    return ops is not None and request_op in ops


@functools.lru_cache(maxsize=4096)
def _network(rule_host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return parse_host(rule_host)
    except ValueError:
        return None


@functools.lru_cache(maxsize=65536)
def client_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The client's address; an IPv4-mapped IPv6 address counts as the IPv4 one."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def host_match(request_host: str, rule_host: str) -> bool:
    if rule_host in (ANY_HOST, request_host):
        return True
    network = _network(rule_host)
    address = client_address(request_host)
    return network is not None and address is not None and address in network


FUNCTIONS: dict[str, Callable[..., bool]] = {
    "resourceMatch": resource_match,
    "opMatch": op_match,
    "hostMatch": host_match,
}


def register_functions(enforcer: casbin.Enforcer) -> None:
    for name, function in FUNCTIONS.items():
        enforcer.add_function(name, function)


# -- casbin plumbing ------------------------------------------------------------


class DenyFirstEffector(Effector):  # type: ignore[misc]
    """``DENY_OVERRIDE`` for rules ordered deny-first: stop at the first match.

    Every DENY candidate precedes every ALLOW one, so the first matching rule
    decides exactly as "some allow and no deny" does, and casbin's explanation
    is that rule.
    """

    def intermediate_effect(self, effects: set[int]) -> int:
        if Effector.DENY in effects:
            return int(Effector.DENY)
        if Effector.ALLOW in effects:
            return int(Effector.ALLOW)
        return int(Effector.INDETERMINATE)

    def final_effect(self, effects: set[int]) -> int:
        if Effector.DENY in effects or Effector.ALLOW not in effects:
            return int(Effector.DENY)
        return int(Effector.ALLOW)


class _RowsAdapter(Adapter):  # type: ignore[misc]
    """A casbin adapter over rows the store already parsed."""

    def __init__(self, rules: Iterable[Sequence[str]], members: Iterable[Membership]) -> None:
        self._rules = [list(row) for row in rules]
        self._members = [[m.member, m.role] for m in members]

    def load_policy(self, model: Any) -> None:
        model.model["p"]["p"].policy.extend(self._rules)
        model.model["g"]["g"].policy.extend(self._members)


class _Enforcer(casbin.Enforcer):  # type: ignore[misc]
    """casbin's enforcer, compiling the matcher once instead of on every call."""

    def _get_expression(self, expr: str, functions: Any = None) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_kgw_expressions", {})
        expression = cache.get(expr)
        if expression is None:
            expression = cache[expr] = casbin.Enforcer._get_expression(expr, functions)
        return expression


class ModelError(ValueError):
    """``model.conf`` is not a model this gateway can use."""


def load_model(text: str) -> Any:
    """Parse and check ``model.conf``; ``ModelError`` says what is wrong."""
    try:
        model = casbin.Enforcer.new_model(text=text)
    except Exception as exc:  # casbin raises whatever its parser hits
        raise ModelError(f"model.conf does not parse: {exc}") from None
    checks = (
        ("r", "r", "request_definition"),
        ("p", "p", "policy_definition"),
        ("g", "g", "role_definition"),
        ("e", "e", "policy_effect"),
        ("m", "m", "matchers"),
    )
    for sec, key, name in checks:
        if sec not in model.model or key not in model.model[sec]:
            raise ModelError(f"model.conf has no [{name}] {key} = ...")
    if model.model["r"]["r"].tokens != REQUEST_TOKENS:
        raise ModelError("model.conf: request_definition must be r = sub, host, rtype, name, op")
    if model.model["p"]["p"].tokens != POLICY_TOKENS:
        raise ModelError(
            "model.conf: policy_definition must be p = sub, rtype, pattern, name, op, host, eft"
        )
    effect = " ".join(model.model["e"]["e"].value.split()).replace("p_eft", "p.eft")
    if effect != DENY_OVERRIDE:
        raise ModelError(f"model.conf: policy_effect must be e = {DENY_OVERRIDE}")
    return model


class _TypeIndex:
    """One resource type's rules by name pattern (positions into the ordered rows)."""

    __slots__ = ("literal", "prefix_lengths", "prefixed", "wildcard")

    def __init__(self) -> None:
        self.wildcard: list[int] = []
        self.literal: dict[str, list[int]] = defaultdict(list)
        self.prefixed: dict[str, list[int]] = defaultdict(list)
        self.prefix_lengths: list[int] = []

    def positions(self, name: str) -> list[int]:
        found = self.wildcard + self.literal.get(name, [])
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found += self.prefixed.get(name[:length], ())
        return found


class CompiledPolicy:
    """One policy version, ready to answer; immutable once built."""

    def __init__(self, model_text: str, rules: Iterable[AclRule], members: Iterable[Membership]):
        model = load_model(model_text)
        unique = list(dict.fromkeys(rules))
        # deny rules first (file order within each), so the first match decides
        ordered = [r for r in unique if r.permission is Permission.DENY] + [
            r for r in unique if r.permission is Permission.ALLOW
        ]
        self.rules = ordered
        self.members = list(dict.fromkeys(members))
        rows = [casbin_row(rule) for rule in ordered]
        self.rows: list[list[str]] = [list(row) for row in rows]
        self.by_row: dict[Row, AclRule] = dict(zip(rows, ordered, strict=True))
        self.graph = RoleGraph(self.members)
        self._index: dict[str, _TypeIndex] = defaultdict(_TypeIndex)
        for position, rule in enumerate(ordered):
            index = self._index[rule.resource_type.name]
            if rule.pattern_type.name == "PREFIXED":
                index.prefixed[rule.name].append(position)
            elif rule.name == WILDCARD:
                index.wildcard.append(position)
            else:
                index.literal[rule.name].append(position)
        for index in self._index.values():
            index.prefix_lengths = sorted({len(prefix) for prefix in index.prefixed})
        self._lock = threading.Lock()
        self.enforcer = _Enforcer(model, _RowsAdapter(self.rows, self.members))
        self.enforcer.set_effector(DenyFirstEffector())
        register_functions(self.enforcer)
        self._assertion = self.enforcer.get_model().model["p"]["p"]
        self._subjects = functools.lru_cache(maxsize=65536)(self._subjects_uncached)
        self._probe()

    def _probe(self) -> None:
        """Run every part of the matcher once, so a broken model fails now, not on a request."""
        self._assertion.policy = [
            ["Role:probe", "TOPIC", "LITERAL", "*", "ALL", "*", "deny"],
            ["User:*", "TOPIC", "PREFIXED", "pro", "READ", "127.0.0.0/8", "allow"],
        ]
        try:
            allowed, _ = self.enforcer.enforce_ex(
                "User:probe", "127.0.0.1", "TOPIC", "probe", "DESCRIBE"
            )
        except Exception as exc:
            raise ModelError(f"model.conf matcher does not evaluate: {exc}") from None
        finally:
            self._assertion.policy = self.rows
        if allowed is not True:
            raise ModelError("model.conf matcher denies what Kafka's rules allow (a probe)")

    def _subjects_uncached(self, principal: str) -> frozenset[str]:
        return frozenset([principal, WILDCARD_PRINCIPAL, *self.graph.ancestors(principal)])

    def candidates(self, principal: str, resource_type: str, name: str) -> list[list[str]]:
        """The rows that can apply, deny-first: a superset of what the matcher accepts."""
        index = self._index.get(resource_type)
        if index is None:
            return []
        subjects = self._subjects(principal)
        rows = self.rows
        return [rows[p] for p in sorted(index.positions(name)) if rows[p][0] in subjects]

    def enforce(
        self, principal: str, host: str, resource_type: ResourceType, name: str, op: Operation
    ) -> tuple[bool, AclRule | None]:
        """casbin's answer and the rule that gave it (``None``: nothing matched)."""
        rows = self.candidates(principal, resource_type.name, name)
        if not rows:
            return False, None
        with self._lock:
            self._assertion.policy = rows
            try:
                allowed, explain = self.enforcer.enforce_ex(
                    principal, host, resource_type.name, name, op.name
                )
            finally:
                self._assertion.policy = self.rows
        rule = self.by_row.get(tuple(explain)) if explain else None
        return bool(allowed), rule


def reference_enforcer(
    model_text: str, rules: Iterable[AclRule], members: Iterable[Membership]
) -> Any:
    """An unmodified casbin enforcer over all rules (no candidate filter, casbin's effector).

    Slow; for tests that check the engine against plain casbin.
    """
    model = load_model(model_text)
    rows = [casbin_row(rule) for rule in dict.fromkeys(rules)]
    enforcer = casbin.Enforcer(model, _RowsAdapter(rows, dict.fromkeys(members)))
    register_functions(enforcer)
    return enforcer
