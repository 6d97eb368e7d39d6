"""Java ``Matcher.replaceAll`` replacement strings (``$1``, ``${name}``, ``\\x``) in Python.

Kafka's ``ssl.principal.mapping.rules`` and ``sasl.kerberos.principal.to.local.rules``
both use Java's syntax; ``gateway/tls/principal.py`` and ``gateway/sasl/kerberos_rules.py``
share this.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Replacement = Callable[[re.Match[str]], str]
_GROUP_REF = re.compile(r"\\(.)|\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\$")


def compile_replacement(
    text: str, pattern: re.Pattern[str], rule: str, error: type[Exception]
) -> Replacement:
    """A function of the match; ``error(message)`` for a reference the pattern lacks."""
    parts: list[str | int] = []  # literal text, or a group number to insert
    pos = 0
    for ref in _GROUP_REF.finditer(text):
        parts.append(text[pos : ref.start()])
        escaped, number, name = ref.groups()
        if escaped is not None:
            parts.append(escaped)
        elif number is not None:
            if int(number) > pattern.groups:
                raise error(f"{rule!r}: ${number} but the pattern has {pattern.groups} groups")
            parts.append(int(number))
        elif name is not None:
            if name not in pattern.groupindex:
                raise error(f"{rule!r}: the pattern has no group named {name!r}")
            parts.append(pattern.groupindex[name])
        else:
            raise error(f"{rule!r}: '$' in the replacement must name a group ($1, ${{name}})")
        pos = ref.end()
    parts.append(text[pos:])

    def replace(match: re.Match[str]) -> str:
        return "".join((match.group(p) or "") if isinstance(p, int) else p for p in parts)

    return replace
