"""Licence limits: what a tenant's plan lets it create. Pure functions, no I/O.

A tenant's topics are those whose names start with its prefix (``topic_prefix``,
``{tenant}.`` by default); usage is computed from the cluster's topic list, which
the caller supplies as ``(topic, partitions)`` pairs. Every hard limit is answered
with POLICY_VIOLATION (44): retrying cannot help, so clients must not retry.
THROTTLING_QUOTA_EXCEEDED (89) is only for the partition mutation rate (KIP-599),
which clients do retry after the throttle time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .model import Plan

NONE = 0
POLICY_VIOLATION = 44
THROTTLING_QUOTA_EXCEEDED = 89
INFINITE = -1  # retention.ms = -1: keep forever


class LicenceVerdict(NamedTuple):
    ok: bool
    error_code: int
    message: str | None


ALLOWED = LicenceVerdict(True, NONE, None)


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """``partitions``: the effective count (resolve Kafka's -1 to ``num.partitions``
    first); ``retention_ms``: the value the broker will store, parsed as it parses it
    (``gateway.kafkaconfig``, never Python's ``int()``), None when the request sets none."""

    name: str
    partitions: int
    retention_ms: int | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    topic: str
    total: int  # the topic's partition count after the request


@dataclass(frozen=True, slots=True)
class AlterRetention:
    topic: str
    retention_ms: int  # the new value as the broker parses it; -1 for infinite


LicenceRequest = CreateTopic | CreatePartitions | AlterRetention


@dataclass(frozen=True, slots=True)
class TenantUsage:
    tenant: str
    prefix: str
    topics: Mapping[str, int] = field(default_factory=dict)  # topic -> partitions

    @property
    def topic_count(self) -> int:
        return len(self.topics)

    @property
    def total_partitions(self) -> int:
        return sum(self.topics.values())

    def owns(self, topic: str) -> bool:
        return topic.startswith(self.prefix) and len(topic) > len(self.prefix)

    def after(self, request: LicenceRequest) -> TenantUsage:
        """The usage once ``request`` is carried out (for several in one Kafka request)."""
        topics = dict(self.topics)
        if isinstance(request, CreateTopic) and self.owns(request.name):
            topics.setdefault(request.name, max(request.partitions, 1))
        elif isinstance(request, CreatePartitions) and request.topic in topics:
            topics[request.topic] = max(topics[request.topic], request.total)
        return TenantUsage(self.tenant, self.prefix, topics)


def tenant_prefix(tenant: str, prefix_format: str = "{tenant}.") -> str:
    return prefix_format.replace("{tenant}", tenant)


def tenant_usage(
    tenant: str, topics: Iterable[tuple[str, int]], prefix_format: str = "{tenant}."
) -> TenantUsage:
    """The tenant's topics and partition counts, from the cluster's ``(topic, partitions)``."""
    prefix = tenant_prefix(tenant, prefix_format)
    usage = TenantUsage(tenant, prefix)
    owned = {name: int(count) for name, count in topics if usage.owns(name)}
    return TenantUsage(tenant, prefix, owned)


def check_licence(
    plan: Plan | None,
    usage: TenantUsage,
    request: LicenceRequest,
    *,
    mutation_throttle_ms: float = 0.0,
) -> LicenceVerdict:
    """``(ok, error_code, message)`` for one topic of CreateTopics / CreatePartitions /
    a retention.ms change. ``mutation_throttle_ms``: the engine's ``throttle_for``
    on ``QuotaKind.MUTATIONS`` (KIP-599), checked after the hard limits."""
    if plan is None:
        return ALLOWED
    if isinstance(request, CreateTopic):
        verdict = _create_topic(plan, usage, request)
    elif isinstance(request, CreatePartitions):
        verdict = _create_partitions(plan, usage, request)
    else:
        verdict = _retention(plan, request.topic, request.retention_ms)
    if not verdict.ok or isinstance(request, AlterRetention) or mutation_throttle_ms <= 0:
        return verdict
    return LicenceVerdict(
        False,
        THROTTLING_QUOTA_EXCEEDED,
        f"partition creation rate of plan '{plan.name}' exceeded; "
        f"retry in {round(mutation_throttle_ms)} ms",
    )


def check_requests(
    plan: Plan | None,
    usage: TenantUsage,
    requests: Sequence[LicenceRequest],
    *,
    mutation_throttle_ms: float = 0.0,
) -> list[LicenceVerdict]:
    """One verdict per request, each counting the ones allowed before it."""
    verdicts = []
    for request in requests:
        verdict = check_licence(plan, usage, request, mutation_throttle_ms=mutation_throttle_ms)
        if verdict.ok:
            usage = usage.after(request)
        verdicts.append(verdict)
    return verdicts


def _refuse(message: str) -> LicenceVerdict:
    return LicenceVerdict(False, POLICY_VIOLATION, message)


def _outside(plan: Plan, usage: TenantUsage, topic: str) -> LicenceVerdict:
    return _refuse(
        f"topic '{topic}' is outside tenant '{usage.tenant}''s namespace: "
        f"under plan '{plan.name}' its topic names start with '{usage.prefix}'"
    )


def _create_topic(plan: Plan, usage: TenantUsage, request: CreateTopic) -> LicenceVerdict:
    limits = plan.config
    if not usage.owns(request.name):
        return _outside(plan, usage, request.name)
    if request.name in usage.topics:
        return ALLOWED  # the broker answers TOPIC_ALREADY_EXISTS
    if limits.max_topics is not None and usage.topic_count + 1 > limits.max_topics:
        return _refuse(
            f"plan '{plan.name}' allows tenant '{usage.tenant}' at most {limits.max_topics} "
            f"topics and it has {usage.topic_count}"
        )
    partitioned = (limits.max_partitions_per_topic, limits.max_total_partitions)
    if request.partitions < 1 and any(limit is not None for limit in partitioned):
        return _refuse(
            f"plan '{plan.name}' limits partitions: give the number of partitions explicitly"
        )
    verdict = _partitions(plan, usage, request.name, request.partitions, request.partitions)
    if not verdict.ok or request.retention_ms is None:
        return verdict
    return _retention(plan, request.name, request.retention_ms)


def _create_partitions(plan: Plan, usage: TenantUsage, request: CreatePartitions) -> LicenceVerdict:
    if not usage.owns(request.topic):
        return _outside(plan, usage, request.topic)
    current = usage.topics.get(request.topic)
    if current is None:  # not in the view (yet): only what needs no count is checked
        most = plan.config.max_partitions_per_topic
        if most is not None and request.total > most:
            return _partitions(plan, usage, request.topic, request.total, 0)
        return ALLOWED
    if request.total <= current:
        return ALLOWED  # not an increase: the broker answers
    return _partitions(plan, usage, request.topic, request.total, request.total - current)


def _partitions(
    plan: Plan, usage: TenantUsage, topic: str, per_topic: int, added: int
) -> LicenceVerdict:
    limits = plan.config
    most = limits.max_partitions_per_topic
    if most is not None and per_topic > most:
        return _refuse(
            f"plan '{plan.name}' allows at most {most} partitions per topic; "
            f"'{topic}' would have {per_topic}"
        )
    total = limits.max_total_partitions
    if total is not None and usage.total_partitions + added > total:
        return _refuse(
            f"plan '{plan.name}' allows tenant '{usage.tenant}' at most {total} partitions "
            f"in all; it has {usage.total_partitions} and asked for {added} more"
        )
    return ALLOWED


def _retention(plan: Plan, topic: str, retention_ms: int) -> LicenceVerdict:
    most = plan.config.max_retention_ms
    if most is None:
        return ALLOWED
    if retention_ms == INFINITE or retention_ms < INFINITE:
        return _refuse(
            f"plan '{plan.name}' allows retention.ms up to {most}; "
            f"'{topic}' asked for infinite retention ({retention_ms})"
        )
    if retention_ms > most:
        return _refuse(
            f"plan '{plan.name}' allows retention.ms up to {most}; "
            f"'{topic}' asked for {retention_ms}"
        )
    return ALLOWED
