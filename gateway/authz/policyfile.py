"""The policy file: casbin's CSV lines, parsed and written without I/O.

::

    # comment
    p, <principal>, <RESOURCE_TYPE>, <LITERAL|PREFIXED>, <name>, <OPERATION>, <host>, <allow|deny>
    g, <member principal>, <role principal>

Fields are separated by commas and trimmed; a field holding a comma, a quote, a
``#`` or surrounding spaces is written in double quotes (``""`` inside quotes is a
quote), as RFC 4180 CSV does, so any group or transactional id round-trips.
Enum names are case-insensitive on input and written in upper case.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .model import AclRule, Operation, PatternType, Permission, ResourceType

RULE_FIELDS = 7  # after the "p"
MEMBER_FIELDS = 2  # after the "g"
_NEEDS_QUOTES = set(',"#[]()')


class LineError(ValueError):
    """A line that is not a policy line; the message says what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Membership:
    """``member`` inherits every rule of ``role`` (casbin's ``g``)."""

    member: str
    role: str


@dataclass(frozen=True, slots=True)
class Located:
    """Something read from the file, with its 1-based line number."""

    line: int
    item: AclRule | Membership


@dataclass(slots=True)
class ParsedPolicy:
    """A policy file's content: what parsed, and the lines that did not."""

    source: str
    text: str
    rules: list[tuple[int, AclRule]] = field(default_factory=list)
    members: list[tuple[int, Membership]] = field(default_factory=list)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def split_fields(line: str) -> list[str]:
    """Split one CSV line: commas separate, spaces around fields go, quotes protect."""
    if '"' not in line:
        return [part.strip() for part in line.split(",")]
    fields: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == '"':
            i += 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise LineError("unterminated quote")
                if line[i] == '"':
                    if line.startswith('""', i):
                        chars.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                chars.append(line[i])
                i += 1
            value = "".join(chars)
            while i < n and line[i] in " \t":
                i += 1
            if i < n and line[i] != ",":
                raise LineError("text after a closing quote")
        else:
            end = line.find(",", i)
            end = n if end < 0 else end
            value = line[i:end].strip()
            if '"' in value:
                raise LineError('a field with a " must be quoted as a whole')
            i = end
        fields.append(value)
        if i >= n:
            return fields
        i += 1  # the comma


def quote_field(value: str) -> str:
    if value == "" or value != value.strip() or any(c in _NEEDS_QUOTES for c in value):
        return '"' + value.replace('"', '""') + '"'
    return value


def _enum(cls: type[ResourceType | PatternType | Operation], value: str, what: str) -> int:
    try:
        return int(cls[value.upper()])
    except KeyError:
        names = ", ".join(member.name for member in cls)
        raise LineError(f"unknown {what} {value!r} (one of {names})") from None


def parse_rule_fields(fields: list[str]) -> AclRule:
    if len(fields) != RULE_FIELDS:
        raise LineError(
            f"a 'p' line has {RULE_FIELDS} fields after 'p' (principal, resource type, "
            f"pattern type, name, operation, host, allow|deny), found {len(fields)}"
        )
    principal, rtype, pattern, name, operation, host, effect = fields
    if effect.lower() not in ("allow", "deny"):
        raise LineError(f"unknown permission {effect!r} (allow or deny)")
    return AclRule(
        principal=principal,
        resource_type=ResourceType(_enum(ResourceType, rtype, "resource type")),
        pattern_type=PatternType(_enum(PatternType, pattern, "pattern type")),
        name=name,
        operation=Operation(_enum(Operation, operation, "operation")),
        host=host,
        permission=Permission.ALLOW if effect.lower() == "allow" else Permission.DENY,
    )


def parse_line(line: str) -> AclRule | Membership | None:
    """One line: a rule, a membership, or ``None`` for blank lines and comments."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    fields = split_fields(stripped)
    kind, rest = fields[0], fields[1:]
    if kind == "p":
        return parse_rule_fields(rest)
    if kind == "g":
        if len(rest) != MEMBER_FIELDS:
            raise LineError(
                f"a 'g' line has {MEMBER_FIELDS} fields after 'g' (member, role), found {len(rest)}"
            )
        return Membership(member=rest[0], role=rest[1])
    raise LineError(f"a line starts with 'p' (a rule) or 'g' (a role membership), not {kind!r}")


def parse_policy(text: str, source: str = "policy.csv") -> ParsedPolicy:
    parsed = ParsedPolicy(source=source, text=text)
    for number, line in enumerate(text.split("\n"), start=1):  # only \n ends a line
        try:
            item = parse_line(line)
        except LineError as exc:
            parsed.bad_lines.append((number, str(exc)))
            continue
        if isinstance(item, AclRule):
            parsed.rules.append((number, item))
        elif isinstance(item, Membership):
            parsed.members.append((number, item))
    return parsed


def casbin_row(rule: AclRule) -> tuple[str, ...]:
    """The rule as casbin's ``p`` values (the request uses the same spellings)."""
    return (
        rule.principal,
        rule.resource_type.name,
        rule.pattern_type.name,
        rule.name,
        rule.operation.name,
        rule.host,
        rule.permission.name.lower(),
    )


def format_rule(rule: AclRule) -> str:
    return ", ".join(["p", *(quote_field(value) for value in casbin_row(rule))])


def format_membership(membership: Membership) -> str:
    return f"g, {quote_field(membership.member)}, {quote_field(membership.role)}"
