"""A tenant's namespace: its tenant-side names and the cluster-side names they stand for.

Pure. Every topic, consumer group and transactional id of a tenant lives under one
cluster-side prefix (``acme.``, the same ``{tenant}.`` the policies and quotas use),
so one ``Namespace`` maps all three kinds. Tenant → cluster always succeeds: whatever
the tenant types is put under its prefix (``other.orders`` becomes
``acme.other.orders``), so no spelling reaches outside. Cluster → tenant succeeds only
for names under the prefix; anything else is foreign and must be left out of what the
tenant sees (``None``). Names are compared exactly (Kafka's names are case-sensitive
and not normalised), so ``ACME.orders`` or a look-alike in another script is foreign.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import saferegex

# Kafka's own limit on a topic name; the broker refuses longer cluster-side names
# with INVALID_TOPIC_EXCEPTION, which the tenant then sees in its own names.
MAX_TOPIC_LENGTH = 249


class NameRefused(ValueError):
    """A tenant-side name or pattern that cannot be mapped; the message says why."""


@dataclass(frozen=True, slots=True)
class Namespace:
    """One tenant's prefix, and the mapping both ways."""

    tenant: str
    prefix: str

    def __post_init__(self) -> None:
        if not self.prefix:
            raise ValueError("a namespace needs a non-empty prefix")

    def to_cluster(self, name: str) -> str:
        """The cluster-side name of the tenant's ``name`` (always inside the namespace)."""
        return self.prefix + name

    def to_tenant(self, name: str) -> str | None:
        """The tenant-side name of a cluster-side ``name``; ``None``: not the tenant's."""
        if name.startswith(self.prefix):
            return name[len(self.prefix) :]
        return None

    def owns(self, name: str) -> bool:
        return name.startswith(self.prefix)

    def topic_to_cluster(self, name: str) -> str:
        """A topic name to create: Kafka's rules on the tenant-side name (never ``''``,
        ``.`` or ``..``, which are illegal on a private cluster too), then mapped."""
        if name in ("", ".", ".."):
            raise NameRefused(f"topic name {name!r} is illegal")
        return self.to_cluster(name)

    def strip_message(self, message: str | None) -> str | None:
        """A broker's error message with cluster-side names shown as the tenant's."""
        if not message or self.prefix not in message:
            return message
        return _boundary(self.prefix).sub("", message)

    def regex_to_cluster(self, pattern: str) -> str:
        """A tenant's regular expression over its own names, as one the brokers apply to
        cluster-side names (whole names, RE2J / java.util.regex): ``<prefix>(?:R)`` with
        R re-emitted from a parse in the syntax every dialect reads alike
        (``gateway/saferegex.py``), so only names inside the namespace can match.
        Refused (``NameRefused``) outside that syntax."""
        try:
            return saferegex.confine(self.prefix, pattern)
        except saferegex.RegexRefused as exc:
            raise NameRefused(f"regular expression refused: {exc}") from None

    def regex_to_tenant(self, pattern: str) -> str:
        """The tenant's pattern (as re-emitted) back from ``regex_to_cluster``'s form."""
        head = f"{saferegex.literal(self.prefix)}(?:"
        if pattern.startswith(head) and pattern.endswith(")"):
            return pattern[len(head) : -1]
        return pattern


_BOUNDARIES: dict[str, re.Pattern[str]] = {}


def _boundary(prefix: str) -> re.Pattern[str]:
    """The prefix where a name starts (not inside another word or name)."""
    found = _BOUNDARIES.get(prefix)
    if found is None:
        if len(_BOUNDARIES) > 4096:
            _BOUNDARIES.clear()
        found = re.compile(r"(?<![A-Za-z0-9._-])" + re.escape(prefix))
        _BOUNDARIES[prefix] = found
    return found
