"""The quota side of one connection's admin requests, after authorization.

``QuotaAdmin.decide`` takes the authorization verdict (``PASS`` without
authorization) and adds what quotas decide: Kafka's ClientQuotas APIs answered
from the gateway's store (``client_quotas_api``), and plan licence limits on
CreateTopics, CreatePartitions and retention changes (``licence_apis``). No I/O: work
that needs any comes back as a ``Deferred`` for the network layer to run.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..enforcement.toolkit import chain
from ..enforcement.verdict import Verdict
from . import client_quotas_api, licence_apis
from .kafka_messages import CLIENT_QUOTA_APIS, DESCRIBE_CLIENT_QUOTAS
from .licence_apis import LICENCE_APIS, Licence, Note, TopicSource
from .model import Plan, QuotaKind, Subject
from .settings import PlanConfig

METADATA = 3  # its auto-creation is turned off for licensed tenants (_no_auto_creation)

if TYPE_CHECKING:
    from ..identity import ClientIdentity
    from .engine import QuotaEngine


class QuotaAdmin:
    """Binds the quota engine and the cluster's topic list to one connection's identity."""

    __slots__ = ("engine", "identity", "note", "topics")
    api_keys = CLIENT_QUOTA_APIS | LICENCE_APIS | {METADATA}

    def __init__(
        self,
        engine: QuotaEngine,
        identity: ClientIdentity,
        topics: TopicSource,
        note: Note | None = None,
    ) -> None:
        self.engine = engine
        self.identity = identity
        self.topics = topics  # the cluster's topic list, read when a licence counts topics
        self.note = note  # creations the brokers confirmed, before their metadata shows them

    def decide(self, key: int, request: Any, rc: type[Any], verdict: Verdict) -> Verdict:
        if verdict.forward is None or verdict.close is not None:
            return verdict  # refused or answered already
        if key in CLIENT_QUOTA_APIS:
            if key == DESCRIBE_CLIENT_QUOTAS:
                return client_quotas_api.describe(request, rc, self.engine)
            return client_quotas_api.alter(request, rc, self.engine, self.identity.principal)
        context = self.licence()
        if context is None:
            return verdict
        base = verdict.forward if verdict.rewritten else request
        if key == METADATA:  # a mutation rate alone leaves auto-creation to the brokers
            return _no_auto_creation(verdict, base) if _licensing(context.plan) else verdict
        return chain(verdict, licence_apis.decide(key, base, rc, context, self.topics, self.note))

    def licence(self) -> Licence | None:
        """The connection's licence context: its tenant's plan when the plan limits what
        it creates, else, when a ``mutations`` quota applies to it (set on its API key,
        principal or tenant, docs/quotas.md), that rate alone. None: neither."""
        identity = self.identity
        tenant = identity.tenant
        plan = self.engine.plan_for(tenant) if tenant is not None else None
        subject = Subject(identity.principal, identity.api_key_id, tenant, identity.host)
        engine = self.engine
        prefix_format = engine.cfg.topic_prefix
        if plan is None or not _licensing(plan):
            if engine.limit(subject, QuotaKind.MUTATIONS) is None:
                return None
            # the mutation rate alone: no limits, no namespace to keep to (authorization's)
            plan, prefix_format = Plan("mutations quota", PlanConfig()), ""

        def charge(partitions: int) -> None:
            engine.charge(subject, QuotaKind.MUTATIONS, partitions)

        return Licence(
            tenant=tenant or "",
            plan=plan,
            prefix_format=prefix_format,
            mutation_throttle_ms=engine.throttle_for(subject, QuotaKind.MUTATIONS),
            charge_mutations=charge,
            principal=identity.principal,
        )


def _no_auto_creation(verdict: Verdict, base: Any) -> Verdict:
    """A licensed tenant's Metadata (v4+) never asks the brokers to auto-create topics:
    they would be created uncounted, with the brokers' default partitions and
    retention. Its clients create topics with CreateTopics, where the plan counts them.
    (v0-3 carry no such flag: auto-creation there is the brokers' setting alone.)"""
    if not getattr(base, "allow_auto_topic_creation", False):
        return verdict
    forward = dataclasses.replace(base, allow_auto_topic_creation=False)
    return dataclasses.replace(verdict, forward=forward, rewritten=True)


def _licensing(plan: Plan) -> bool:
    """Does the plan limit what its tenants create (a licence limit or a mutation rate)?"""
    limits = plan.config
    hard = (
        limits.max_topics,
        limits.max_partitions_per_topic,
        limits.max_total_partitions,
        limits.max_retention_ms,
    )
    return any(limit is not None for limit in hard) or QuotaKind.MUTATIONS.value in limits.values()
