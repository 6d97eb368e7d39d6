"""Which topics are encrypted for whom: the policies of the settings as lookups. No I/O."""

from __future__ import annotations

from dataclasses import dataclass

from .settings import ANY_TENANT, PolicyConfig

DEFAULT_KEK = "default"


@dataclass(frozen=True, slots=True)
class Rule:
    kek: str
    key: bool
    headers: bool
    batch: bool = False  # granularity "batch": one envelope per batch (format 2)


class Policies:
    def __init__(self, policies: list[PolicyConfig]) -> None:
        self._policies = policies
        self._names = frozenset(n for p in policies for n in p.topics)
        self._prefixes = tuple(sorted({x for p in policies for x in p.prefixes}))

    def covers_tenant(self, tenant: str | None) -> bool:
        """Whether any policy applies to ``tenant``'s producers (else their Produce
        requests are not even decoded)."""
        return any(p.tenant in (ANY_TENANT, tenant) for p in self._policies)

    def seals_batches(self, tenant: str | None) -> bool:
        """Whether some policy seals whole batches of ``tenant``'s records."""
        return any(
            p.tenant in (ANY_TENANT, tenant) and p.granularity == "batch" for p in self._policies
        )

    def any_covers(self, topic: str) -> bool:
        """Whether some policy (of any tenant) covers ``topic``: its fetches are scanned."""
        return topic in self._names or topic.startswith(self._prefixes)

    def rule(self, tenant: str | None, topic: str) -> Rule | None:
        """How ``tenant``'s records to ``topic`` are encrypted, or ``None``: not at all."""
        for policy in self._policies:
            if policy.tenant != ANY_TENANT and policy.tenant != tenant:
                continue
            if topic in policy.topics or topic.startswith(tuple(policy.prefixes)):
                kek = policy.kek or tenant or DEFAULT_KEK
                return Rule(
                    kek,
                    "key" in policy.fields,
                    "headers" in policy.fields,
                    policy.granularity == "batch",
                )
        return None
