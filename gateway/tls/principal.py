"""Principal mapping rules in the style of Kafka's ``ssl.principal.mapping.rules``.

A rule is ``DEFAULT`` (the name unchanged) or ``RULE:pattern/replacement/[LU]``:
when the regular expression matches the *whole* name, every match is replaced
(Java's ``replaceAll``; ``$1``/``${name}`` refer to groups, ``\\`` escapes),
then ``L`` lower-cases or ``U`` upper-cases the result. Rules are tried in
order; the first that applies wins; if none applies there is no principal
(the connection is refused, as Kafka does).

The name is the certificate's subject DN in RFC 2253/4514 form
(``CN=app1,OU=payments,O=Acme``), or a subject alternative name when the
listener takes the principal from a SAN. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography import x509

from ..javaregex import compile_replacement

NameSource = Literal["subject", "san_dns", "san_uri", "san_email"]
_SAN_KINDS: dict[str, type[x509.DNSName | x509.UniformResourceIdentifier | x509.RFC822Name]] = {
    "san_dns": x509.DNSName,
    "san_uri": x509.UniformResourceIdentifier,
    "san_email": x509.RFC822Name,
}
_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)")


class RuleError(ValueError):
    """A mapping rule cannot be parsed (configuration)."""


class NoPrincipal(Exception):
    """The certificate yields no principal (no rule applies, or the SAN is missing)."""


Replacement = Callable[[re.Match[str]], str]


def _compile_replacement(text: str, pattern: re.Pattern[str], rule: str) -> Replacement:
    return compile_replacement(text, pattern, rule, RuleError)


@dataclass(frozen=True)
class Rule:
    """One parsed rule; ``pattern`` is None for DEFAULT."""

    text: str
    pattern: re.Pattern[str] | None = None
    replacement: Replacement | None = None
    case: Literal["", "L", "U"] = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        assert self.replacement is not None
        result = self.pattern.sub(self.replacement, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def parse_rule(text: str) -> Rule:
    rule = text.strip()
    if rule == "DEFAULT":
        return Rule(rule)
    found = _RULE.fullmatch(rule)
    if found is None:
        raise RuleError(f"{text!r}: expected DEFAULT or RULE:pattern/replacement/[LU]")
    pattern_text, replacement, case = found.groups()
    try:
        pattern = re.compile(pattern_text)
    except re.error as exc:
        raise RuleError(f"{text!r}: bad regular expression: {exc}") from None
    compiled = _compile_replacement(replacement, pattern, text)
    return Rule(rule, pattern, compiled, "L" if case == "L" else "U" if case == "U" else "")


def parse_rules(texts: Sequence[str]) -> tuple[Rule, ...]:
    if not texts:
        raise RuleError("at least one rule is needed (DEFAULT keeps the name as it is)")
    return tuple(parse_rule(t) for t in texts)


def apply_rules(rules: Sequence[Rule], name: str) -> str:
    """The mapped name from the first rule that applies; NoPrincipal if none does."""
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            if not mapped:
                raise NoPrincipal(f"rule {rule.text!r} maps the name to an empty string")
            return mapped
    raise NoPrincipal("no principal mapping rule applies to the certificate's name")


def certificate_name(cert: x509.Certificate, source: NameSource) -> str:
    """The name the rules apply to: the subject DN (RFC 4514) or the first SAN of a kind."""
    if source == "subject":
        return cert.subject.rfc4514_string()
    kind = _SAN_KINDS[source]
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    values = sans.get_values_for_type(kind)
    if not values:
        raise NoPrincipal(f"the client certificate has no {source.removeprefix('san_')} SAN")
    return str(values[0])


def principal_of(cert: x509.Certificate, source: NameSource, rules: Sequence[Rule]) -> str:
    """``User:<mapped name>`` for a verified client certificate."""
    return f"User:{apply_rules(rules, certificate_name(cert, source))}"
