"""Kerberos principal → short name, with rules in the style of Kafka's
``sasl.kerberos.principal.to.local.rules`` (Hadoop's ``auth_to_local``). No I/O.

A Kerberos name ``primary[/instance]@REALM`` has one or two components. Rules
are tried in order; the first that yields a name wins, none yielding one fails
the authentication (Kafka's ``NoMatchingRule``):

- ``DEFAULT``: the primary, when the realm is the default realm.
- ``RULE:[n:format](regex)s/pattern/replacement/[g][/L|/U]``: applies to names
  with ``n`` components. ``format`` builds a string from ``$0`` (realm), ``$1``,
  ``$2`` (components); it must match ``regex`` as a whole (if given); then
  ``s/pattern/replacement/`` replaces the first match (every match with ``g``;
  ``$1`` in the replacement is a group, Java syntax); ``L``/``U`` fold case.
  A result still holding ``/`` or ``@`` is refused, as in Kafka.

Examples: ``RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//`` maps ``alice@EXAMPLE.COM``
to ``alice``; ``RULE:[2:$1@$0](kafka@EXAMPLE\\.COM)s/.*/kafka-service/``
maps every ``kafka/<host>@EXAMPLE.COM`` to ``kafka-service``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..javaregex import compile_replacement

_RULE = re.compile(
    r"(?P<default>DEFAULT)|RULE:\[(?P<n>\d+):(?P<format>[^\]]*)\]"
    r"(?:\((?P<match>[^)]*)\))?"
    r"(?:s/(?P<pattern>[^/]*)/(?P<replacement>[^/]*)/(?P<g>g)?)?"
    r"/?(?P<case>[LU])?"
)
_NAME = re.compile(r"([^/@]*)(?:/([^/@]*))?@([^/@]*)")
_PARAM = re.compile(r"\$(\d*)")
_NON_SIMPLE = re.compile(r"[/@]")


class RuleError(ValueError):
    """A rule cannot be parsed (configuration)."""


class NoMatchingRule(Exception):
    """No rule maps this Kerberos name (the authentication fails)."""


@dataclass(frozen=True, slots=True)
class KerberosName:
    primary: str
    instance: str | None
    realm: str | None

    @classmethod
    def parse(cls, text: str) -> KerberosName:
        found = _NAME.fullmatch(text)
        if found is None:
            if "@" in text or "/" in text:
                raise NoMatchingRule("malformed Kerberos name")
            return cls(text, None, None)
        primary, instance, realm = found.groups()
        return cls(primary, instance, realm)

    def __str__(self) -> str:
        instance = f"/{self.instance}" if self.instance is not None else ""
        realm = f"@{self.realm}" if self.realm is not None else ""
        return f"{self.primary}{instance}{realm}"


Replacement = Callable[[re.Match[str]], str]


@dataclass(frozen=True, slots=True)
class KerberosRule:
    text: str
    default_realm: str
    components: int = 0  # 0 for DEFAULT
    format: str = ""
    match: re.Pattern[str] | None = None
    pattern: re.Pattern[str] | None = None
    replacement: Replacement | None = None
    replace_all: bool = False
    case: Literal["", "L", "U"] = ""

    @property
    def is_default(self) -> bool:
        return self.components == 0

    def apply(self, params: Sequence[str]) -> str | None:
        """``params`` = (realm, primary[, instance]); None if the rule does not apply."""
        result: str | None = None
        if self.is_default:
            if params[0] == self.default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = _PARAM.sub(lambda m: params[int(m.group(1))], self.format)
            if self.match is None or self.match.fullmatch(base):
                if self.pattern is None:
                    result = base
                else:
                    assert self.replacement is not None
                    count = 0 if self.replace_all else 1
                    result = self.pattern.sub(self.replacement, base, count=count)
        if result is None:
            return None
        if _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"rule {self.text!r} leaves a non-simple name")
        if self.case == "L":
            result = result.lower()
        elif self.case == "U":
            result = result.upper()
        return result


def parse_rule(text: str, default_realm: str) -> KerberosRule:
    rule = text.strip()
    found = _RULE.fullmatch(rule)
    if found is None:
        raise RuleError(
            f"{text!r}: expected DEFAULT or RULE:[n:format](regex)s/pattern/replacement/[g][/L|/U]"
        )
    if found["default"]:
        return KerberosRule(rule, default_realm)
    components = int(found["n"])
    if components not in (1, 2):
        raise RuleError(f"{text!r}: a Kerberos name has 1 or 2 components, not {components}")
    for param in _PARAM.finditer(found["format"]):
        if not param.group(1) or int(param.group(1)) > components:
            raise RuleError(f"{text!r}: the format may use $0 to ${components} only")
    match = _compile(found["match"], text) if found["match"] is not None else None
    pattern = _compile(found["pattern"], text) if found["pattern"] is not None else None
    replacement = None
    if pattern is not None:
        replacement = _compile_replacement(found["replacement"], pattern, text)
    case = found["case"] or ""
    return KerberosRule(
        rule,
        default_realm,
        components,
        found["format"],
        match,
        pattern,
        replacement,
        found["g"] == "g",
        "L" if case == "L" else "U" if case == "U" else "",
    )


def _compile(regex: str, rule: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise RuleError(f"{rule!r}: bad regular expression {regex!r}: {exc}") from None


def _compile_replacement(text: str, pattern: re.Pattern[str], rule: str) -> Replacement:
    return compile_replacement(text, pattern, rule, RuleError)


class PrincipalMapper:
    """Kerberos principal → ``User:<short name>``."""

    def __init__(self, rules: Sequence[str], default_realm: str) -> None:
        texts = list(rules) or ["DEFAULT"]
        self.default_realm = default_realm
        self.rules = tuple(parse_rule(text, default_realm) for text in texts)

    def short_name(self, principal: str) -> str:
        name = KerberosName.parse(principal)
        if name.realm is None:  # an authenticated Kerberos name always has a realm
            raise NoMatchingRule("Kerberos name without a realm")
        params = [name.realm, name.primary]
        if name.instance is not None:
            params.append(name.instance)
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                if not result:
                    raise NoMatchingRule(f"rule {rule.text!r} maps to an empty name")
                return result
        raise NoMatchingRule("no principal_to_local rule applies")

    def principal(self, kerberos_principal: str) -> str:
        return f"User:{self.short_name(kerberos_principal)}"


def check_rules(rules: Sequence[str]) -> None:
    """Raise ``RuleError`` for an unparsable rule (configuration validation)."""
    for text in rules:
        parse_rule(text, "")
