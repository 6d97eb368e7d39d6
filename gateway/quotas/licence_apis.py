"""Plan licence limits on the admin APIs that grow a tenant.

CreateTopics (19), CreatePartitions (37) and retention.ms changes through
AlterConfigs (33) / IncrementalAlterConfigs (44) on topics are checked against the
tenant's plan (``licence``): entries beyond it are answered with
POLICY_VIOLATION (or THROTTLING_QUOTA_EXCEEDED for the KIP-599 mutation rate) and
a message; the rest of the request is forwarded. Counting topics and partitions
needs the cluster's current topic list, so CreateTopics and CreatePartitions are
``Deferred`` on a metadata read; retention changes are decided at once. No I/O here.

Every topic config a tenant sends is first read the way the broker reads it
(``gateway.kafkaconfig``: Java's trim and number parsing, Kafka 4.1's topic keys
and validators), so a limit is checked on the value the broker will store; an
unknown key, a duplicate, a null or a value the broker would refuse is answered
with INVALID_CONFIG (40) before any plan check (decision 0023).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..enforcement.toolkit import split
from ..enforcement.verdict import PASS, Deferred, Verdict
from ..kafkaconfig import INVALID_CONFIG, InvalidConfig, TopicChanges, read_changes
from ..kafkaconfig.topic import SET
from .licence import (
    ALLOWED,
    AlterRetention,
    CreatePartitions,
    CreateTopic,
    LicenceRequest,
    LicenceVerdict,
    TenantUsage,
    check_requests,
    tenant_prefix,
    tenant_usage,
)
from .model import Plan

log = logging.getLogger("kgw.quotas")
CREATE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 33, 37, 44
LICENCE_APIS = frozenset(
    {CREATE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS}
)
TOPIC_RESOURCE = 2
RETENTION_MS = "retention.ms"
Wanted = LicenceRequest | LicenceVerdict
"""A request for the plan to check, or a verdict already reached (an invalid config)."""

TopicSource = Callable[[], Awaitable[Mapping[str, int]]]
"""The cluster's topics now: name -> partition count (the network layer awaits it)."""
Note = Callable[[str, int], None]
"""Tells the topic view about a creation the brokers confirmed (topic, partitions)."""


@dataclass(frozen=True, slots=True)
class Licence:
    """One request's licence context: the tenant, its plan, the KIP-599 state."""

    tenant: str
    plan: Plan
    prefix_format: str
    mutation_throttle_ms: float
    charge_mutations: Callable[[int], None]
    principal: str

    def usage(self, topics: Mapping[str, int]) -> TenantUsage:
        return tenant_usage(self.tenant, topics.items(), self.prefix_format)

    def empty(self) -> TenantUsage:
        return TenantUsage(self.tenant, tenant_prefix(self.tenant, self.prefix_format))


def decide(
    key: int,
    request: Any,
    rc: type[Any],
    licence: Licence,
    topics: TopicSource,
    note: Note | None = None,
) -> Verdict:
    """The licence's verdict on ``request`` (what authorization already let through)."""
    if key == CREATE_TOPICS:
        wanted: list[Wanted] = _create_topics(request)
        return _counted(request, rc, licence, topics, note, ("topics", "topics"), wanted)
    if key == CREATE_PARTITIONS:
        wanted = [CreatePartitions(t.name, int(t.count)) for t in request.topics]
        return _counted(request, rc, licence, topics, note, ("topics", "results"), wanted)
    if key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        return _alter_configs(request, rc, licence, incremental=key == INCREMENTAL_ALTER_CONFIGS)
    return PASS


def _create_topics(request: Any) -> list[Wanted]:
    wanted: list[Wanted] = []
    for topic in request.topics:
        partitions = int(topic.num_partitions)
        if partitions < 1 and topic.assignments:
            partitions = len(topic.assignments)
        try:
            changes = read_changes((c.name, c.value, SET) for c in topic.configs or ())
        except InvalidConfig as exc:
            wanted.append(_invalid(exc))
            continue
        wanted.append(CreateTopic(topic.name, partitions, _retention_ms(changes)))
    return wanted


def _invalid(exc: InvalidConfig) -> LicenceVerdict:
    return LicenceVerdict(False, INVALID_CONFIG, str(exc))


def _retention_ms(changes: TopicChanges) -> int | None:
    """The retention.ms the broker will store, as parsed; None when the request sets none."""
    value = changes.values.get(RETENTION_MS)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check(licence: Licence, usage: TenantUsage, wanted: Sequence[Wanted]) -> list[LicenceVerdict]:
    """The plan's verdict on each request, in order; verdicts already reached stay."""
    requests = [w for w in wanted if not isinstance(w, LicenceVerdict)]
    checked = iter(
        check_requests(
            licence.plan, usage, requests, mutation_throttle_ms=licence.mutation_throttle_ms
        )
    )
    return [w if isinstance(w, LicenceVerdict) else next(checked) for w in wanted]


def _needs_usage(licence: Licence) -> bool:
    limits = licence.plan.config
    counted = (limits.max_topics, limits.max_partitions_per_topic, limits.max_total_partitions)
    return any(limit is not None for limit in counted)


def _counted(
    request: Any,
    rc: type[Any],
    licence: Licence,
    topics: TopicSource,
    note: Note | None,
    fields: tuple[str, str],
    wanted: Sequence[Wanted],
) -> Verdict:
    """CreateTopics / CreatePartitions: counted against the tenant's current usage."""
    field, response_field = fields
    entries = list(getattr(request, field))

    def with_usage(usage: TenantUsage) -> Verdict:
        verdicts = _check(licence, usage, wanted)
        verdict = _split(request, rc, field, response_field, entries, verdicts, licence)
        if getattr(request, "validate_only", False):
            return verdict
        added = sum(_added(w, usage) for w, v in zip(wanted, verdicts, strict=True) if v.ok)
        if added:
            licence.charge_mutations(added)
        if note is None or verdict.local is not None:
            return verdict
        return _noting(verdict, response_field, wanted, note)

    if not _needs_usage(licence) or all(isinstance(w, LicenceVerdict) for w in wanted):
        return with_usage(licence.empty())

    def finish(outcome: Any) -> Verdict:
        if isinstance(outcome, BaseException):
            reason = str(outcome) or type(outcome).__name__
            message = (
                f"cannot check the limits of plan '{licence.plan.name}': "
                f"the cluster's topic list is unavailable ({reason}); retry"
            )
            _log_unavailable(licence, reason)
            unavailable = LicenceVerdict(False, int(ErrorCode.unknown_server_error), message)
            verdicts = [w if isinstance(w, LicenceVerdict) else unavailable for w in wanted]
            return _split(request, rc, field, response_field, entries, verdicts, licence)
        return with_usage(licence.usage(outcome))

    return Verdict(defer=Deferred("licence-usage", topics, finish))


def _noting(verdict: Verdict, response_field: str, wanted: Sequence[Wanted], note: Note) -> Verdict:
    """``verdict``, and what the brokers confirm goes to the topic view at once."""
    sizes: dict[str, int] = {}
    for item in wanted:
        if isinstance(item, CreateTopic):
            sizes[item.name] = max(item.partitions, 1)
        elif isinstance(item, CreatePartitions):
            sizes[item.topic] = item.total
    then = verdict.merge

    def merge(response: Any) -> Any:
        for entry in getattr(response, response_field):
            if int(entry.error_code) == 0 and entry.name in sizes:
                note(entry.name, sizes[entry.name])
        return response if then is None else then(response)

    return dataclasses.replace(verdict, merge=merge)


def _added(wanted: Wanted, usage: TenantUsage) -> int:
    if isinstance(wanted, CreateTopic):
        return max(wanted.partitions, 1)
    if isinstance(wanted, CreatePartitions):
        return max(wanted.total - usage.topics.get(wanted.topic, wanted.total), 0)
    return 0


def _alter_configs(request: Any, rc: type[Any], licence: Licence, incremental: bool) -> Verdict:
    entries = list(request.resources)
    verdicts = [_alter_verdict(resource, licence, incremental) for resource in entries]
    return _split(request, rc, "resources", "responses", entries, verdicts, licence)


def _alter_verdict(resource: Any, licence: Licence, incremental: bool) -> LicenceVerdict:
    """One resource of (Incremental)AlterConfigs: its topic configs read, then the plan.

    A DELETE of retention.ms (or AlterConfigs leaving it out) puts the topic on the
    broker's default, which a topic created without retention.ms gets too: the plan
    is not asked (decision 0023, docs/quotas.md)."""
    if int(resource.resource_type) != TOPIC_RESOURCE:
        return ALLOWED
    configs = (
        (c.name, c.value, int(c.config_operation) if incremental else SET)
        for c in resource.configs or ()
    )
    try:
        changes = read_changes(configs)
    except InvalidConfig as exc:
        return _invalid(exc)
    retention = _retention_ms(changes)
    if retention is None:
        return ALLOWED
    (verdict,) = check_requests(
        licence.plan, licence.empty(), [AlterRetention(resource.resource_name, retention)]
    )
    return verdict


def _split(
    request: Any,
    rc: type[Any],
    field: str,
    response_field: str,
    entries: Sequence[Any],
    verdicts: Sequence[LicenceVerdict],
    licence: Licence,
) -> Verdict:
    by_entry = {id(entry): verdict for entry, verdict in zip(entries, verdicts, strict=True)}
    refused = [v for v in verdicts if not v.ok]
    if not refused:
        return PASS
    log.info(
        "licence limit refused %d of %d: %s",
        len(refused),
        len(verdicts),
        refused[0].message,
        extra={
            "event": "licence_refused",
            "principal": licence.principal,
            "subject": f"tenant:{licence.tenant}",
            "reason": refused[0].message,
            "count": len(refused),
        },
    )
    return split(
        request, rc, field, response_field,
        lambda e: by_entry[id(e)].ok,
        lambda e: ErrorCode(by_entry[id(e)].error_code),
        message=lambda e: by_entry[id(e)].message,
    )  # fmt: skip


def _log_unavailable(licence: Licence, reason: str) -> None:
    log.warning(
        "licence check impossible: cluster topic list unavailable",
        extra={
            "event": "licence_check_failed",
            "principal": licence.principal,
            "subject": f"tenant:{licence.tenant}",
            "reason": reason,
        },
    )
