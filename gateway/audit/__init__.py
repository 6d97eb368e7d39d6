"""The admin audit trail: who changed what, when, from what to what, hash-chained.

``AuditTrail.append(actor, action, target, before, after)`` records a change;
``audit_policy_store(store, trail)`` records every policy change; ``kgw audit
verify`` finds edits, deletions, insertions and moves. See ``docs/audit.md``.
"""

from __future__ import annotations

from .chain import Problem, Report
from .hooks import audit_policy_store, policy_change_hook
from .trail import AuditError, AuditTrail, load_key, write_new_key

__all__ = [
    "AuditError",
    "AuditTrail",
    "Problem",
    "Report",
    "audit_policy_store",
    "load_key",
    "policy_change_hook",
    "write_new_key",
]
