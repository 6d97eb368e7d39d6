"""Quotas: token buckets shared through Redis with Kafka's throttle semantics (KIP-219),
connection limits, plans and licence limits, and Kafka's ClientQuotas APIs.

``QuotaEngine`` (one per process) is the entry point; docs/quotas.md explains the
model, the accuracy of the shared buckets and the Redis failure policy.
"""

from __future__ import annotations

from .engine import QuotaEngine
from .kafka_entities import (
    ClientQuotaError,
    DescribedEntry,
    FilterComponent,
    QuotaOp,
    alter_client_quotas,
    describe_client_quotas,
)
from .kafka_messages import alter_entries, alter_response, describe_filter, describe_response
from .licence import (
    POLICY_VIOLATION,
    THROTTLING_QUOTA_EXCEEDED,
    AlterRetention,
    CreatePartitions,
    CreateTopic,
    LicenceVerdict,
    TenantUsage,
    check_licence,
    check_requests,
    tenant_usage,
)
from .model import Limit, Plan, QuotaKind, QuotaSettings, Subject, Target, TargetType
from .settings import PlanConfig, QuotaConfig
from .store import FileQuotaStore, QuotaStore, RedisQuotaStore, StoreError, open_store

__all__ = [
    "POLICY_VIOLATION",
    "THROTTLING_QUOTA_EXCEEDED",
    "AlterRetention",
    "ClientQuotaError",
    "CreatePartitions",
    "CreateTopic",
    "DescribedEntry",
    "FileQuotaStore",
    "FilterComponent",
    "LicenceVerdict",
    "Limit",
    "Plan",
    "PlanConfig",
    "QuotaConfig",
    "QuotaEngine",
    "QuotaKind",
    "QuotaOp",
    "QuotaSettings",
    "QuotaStore",
    "RedisQuotaStore",
    "StoreError",
    "Subject",
    "Target",
    "TargetType",
    "TenantUsage",
    "alter_client_quotas",
    "alter_entries",
    "alter_response",
    "check_licence",
    "check_requests",
    "describe_client_quotas",
    "describe_filter",
    "describe_response",
    "open_store",
    "tenant_usage",
]
