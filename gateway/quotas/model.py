"""Who is charged, for what, and which quota applies: pure data and the resolution rule.

Quota values are kept as ``{key: float}`` per target, with the keys below; plans
(``PlanConfig``) use the same keys. The most specific target that sets a kind's
rate supplies that kind's rate and burst: API key > principal > tenant > the
tenant's plan. Resolution is per kind, so an API key that only limits produce
bytes still falls under its tenant's fetch quota.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..enums import HotEnum
from .settings import PlanConfig


@dataclass(frozen=True, slots=True)
class Subject:
    """Who a request is charged to; built once per authenticated connection."""

    principal: str
    api_key_id: str | None
    tenant: str | None
    client_host: str


class QuotaKind(HotEnum):
    """What a charge counts; the value is the rate's key in the store and in plans."""

    PRODUCE_BYTES = "produce_bytes"
    FETCH_BYTES = "fetch_bytes"
    REQUESTS = "requests"
    MUTATIONS = "mutations"  # partitions created or deleted (Kafka's controller_mutation_rate)

    @property
    def burst_key(self) -> str:
        return f"{self.value}_burst"


class TargetType(enum.Enum):
    API_KEY = "api-key"
    PRINCIPAL = "principal"
    TENANT = "tenant"
    ADDRESS = "ip"


RATE_KEYS = tuple(kind.value for kind in QuotaKind)
BURST_KEYS = tuple(kind.burst_key for kind in QuotaKind)
CONNECTION_KEYS = ("max_connections", "connection_rate")
KEYS_FOR: Mapping[TargetType, frozenset[str]] = {
    TargetType.API_KEY: frozenset(RATE_KEYS + BURST_KEYS),
    TargetType.PRINCIPAL: frozenset(RATE_KEYS + BURST_KEYS),
    TargetType.TENANT: frozenset(RATE_KEYS + BURST_KEYS + CONNECTION_KEYS),
    TargetType.ADDRESS: frozenset(CONNECTION_KEYS),
}
ALL_KEYS = frozenset(RATE_KEYS + BURST_KEYS + CONNECTION_KEYS)


class InvalidQuotaError(ValueError):
    """A quota setting that cannot be stored; the message says why."""


def canonical_address(text: str) -> str:
    """An IP address as the gateway sees a peer's: compressed and lower case, an
    IPv4-mapped IPv6 address as its IPv4 address. Text that is no address stays as it is
    (``check_values`` refuses it in a setting)."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@dataclass(frozen=True, slots=True)
class Target:
    """What a quota value is attached to: ``tenant:acme``, ``principal:User:alice``…"""

    type: TargetType
    name: str

    def __post_init__(self) -> None:
        if self.type is TargetType.ADDRESS:  # one spelling per address, as peers are seen
            object.__setattr__(self, "name", canonical_address(self.name))

    def __str__(self) -> str:
        return f"{self.type.value}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> Target:
        kind, sep, name = text.partition(":")
        try:
            target_type = TargetType(kind)
        except ValueError:
            raise InvalidQuotaError(f"unknown quota target type in {text!r}") from None
        if not sep or not name:
            raise InvalidQuotaError(f"quota target {text!r} has no name")
        return cls(target_type, name)


def check_values(target: Target, values: Mapping[str, float]) -> dict[str, float]:
    """Validated copy of ``values`` for ``target``; ``InvalidQuotaError`` otherwise."""
    if target.type is TargetType.ADDRESS:
        try:
            ipaddress.ip_address(target.name)
        except ValueError:
            raise InvalidQuotaError(f"{target.name!r} is not an IP address") from None
    allowed = KEYS_FOR[target.type]
    checked: dict[str, float] = {}
    for key, value in values.items():
        if key not in allowed:
            where = (
                "unknown quota key"
                if key not in ALL_KEYS
                else f"not settable on {target.type.value}"
            )
            raise InvalidQuotaError(f"{key}: {where} (allowed: {', '.join(sorted(allowed))})")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise InvalidQuotaError(f"{key}: not a finite number")
        if key == "max_connections":
            if number < 0 or number != int(number):
                raise InvalidQuotaError(f"{key}: must be a whole number >= 0")
        elif number <= 0:
            raise InvalidQuotaError(f"{key}: must be > 0")
        checked[key] = number
    return checked


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    config: PlanConfig


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    """One consistent view of the store: explicit values, stored plans, assignments."""

    quotas: Mapping[Target, Mapping[str, float]] = field(default_factory=dict)
    plans: Mapping[str, PlanConfig] = field(default_factory=dict)
    assignments: Mapping[str, str] = field(default_factory=dict)  # tenant -> plan name
    version: str = ""


@dataclass(frozen=True, slots=True)
class Limit:
    """The quota one charge falls under; ``bucket`` names its (shared) token bucket."""

    bucket: str
    rate: float
    burst: float
    source: str  # e.g. "api-key:k1", "plan:gold (tenant:acme)"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int | None = None
    connection_rate: float | None = None


class Resolver:
    """Answers "which quota applies" from one settings snapshot plus the configured plans."""

    def __init__(
        self,
        settings: QuotaSettings,
        config_plans: Mapping[str, PlanConfig],
        default_plan: str | None,
        default_burst_s: float,
    ) -> None:
        self.settings = settings
        self.plans: dict[str, PlanConfig] = {**config_plans, **settings.plans}
        self.default_plan = default_plan
        self.default_burst_s = default_burst_s

    def plan_for(self, tenant: str | None) -> Plan | None:
        """The tenant's assigned plan, else the default plan; None when neither exists."""
        name = self.settings.assignments.get(tenant) if tenant is not None else None
        if name is None or name not in self.plans:
            name = self.default_plan
        if name is None or name not in self.plans:
            return None
        return Plan(name, self.plans[name])

    def limit(self, subject: Subject, kind: QuotaKind) -> Limit | None:
        candidates: list[Target] = []
        if subject.api_key_id is not None:
            candidates.append(Target(TargetType.API_KEY, subject.api_key_id))
        candidates.append(Target(TargetType.PRINCIPAL, subject.principal))
        if subject.tenant is not None:
            candidates.append(Target(TargetType.TENANT, subject.tenant))
        for target in candidates:
            values = self.settings.quotas.get(target)
            if values and kind.value in values:
                return self._limit(kind, values, target, str(target))
        plan = self.plan_for(subject.tenant)
        if plan is None:
            return None
        values = plan.config.values()
        if kind.value not in values:
            return None
        # A plan's quota is the tenant's; without a tenant, each principal gets one.
        owner = (
            Target(TargetType.TENANT, subject.tenant)
            if subject.tenant is not None
            else Target(TargetType.PRINCIPAL, subject.principal)
        )
        return self._limit(kind, values, owner, f"plan:{plan.name} ({owner})")

    def _limit(
        self, kind: QuotaKind, values: Mapping[str, float], owner: Target, source: str
    ) -> Limit:
        rate = values[kind.value]
        burst = values.get(kind.burst_key, rate * self.default_burst_s)
        return Limit(f"{kind.value}|{owner}", rate, burst, source)

    def tenant_connections(self, tenant: str) -> ConnectionLimits:
        explicit = self.settings.quotas.get(Target(TargetType.TENANT, tenant), {})
        plan = self.plan_for(tenant)
        planned = plan.config.values() if plan is not None else {}
        return _connection_limits(explicit, planned)

    def address_connections(self, host: str, defaults: ConnectionLimits) -> ConnectionLimits:
        explicit = self.settings.quotas.get(Target(TargetType.ADDRESS, host), {})
        fallback: dict[str, float] = {}
        if defaults.max_connections is not None:
            fallback["max_connections"] = defaults.max_connections
        if defaults.connection_rate is not None:
            fallback["connection_rate"] = defaults.connection_rate
        return _connection_limits(explicit, fallback)


def _connection_limits(
    explicit: Mapping[str, float], fallback: Mapping[str, float]
) -> ConnectionLimits:
    most = explicit.get("max_connections", fallback.get("max_connections"))
    rate = explicit.get("connection_rate", fallback.get("connection_rate"))
    return ConnectionLimits(int(most) if most is not None else None, rate)
