"""The admin audit trail: who changed what, when, from what to what, hash-chained.

``AuditTrail.append(actor, action, target, before, after)`` records a change;
``audit_policy_store`` / ``audit_quota_store`` / ``audit_credential_store`` record
every change a store writes; ``admin`` is the CLI side (``--audit-trail``),
``wiring`` the gateway's (the ``audit`` config section); ``kgw audit verify``
finds edits, deletions, insertions and moves. See ``docs/audit.md``.
"""

from __future__ import annotations

from .chain import Problem, Report
from .hooks import (
    audit_credential_store,
    audit_policy_store,
    audit_quota_store,
    certificate_json,
    kafka_actor,
    policy_change_hook,
    scrub,
)
from .settings import AuditConfig
from .trail import AuditError, AuditTrail, load_key, write_new_key

__all__ = [
    "AuditConfig",
    "AuditError",
    "AuditTrail",
    "Problem",
    "Report",
    "audit_credential_store",
    "audit_policy_store",
    "audit_quota_store",
    "certificate_json",
    "kafka_actor",
    "load_key",
    "policy_change_hook",
    "scrub",
    "write_new_key",
]
