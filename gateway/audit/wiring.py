"""The gateway process's side of the trail: changes made through the Kafka admin APIs.

CreateAcls/DeleteAcls change the ``PolicyStore``, AlterClientQuotas the
``QuotaStore``; both name the authenticated Kafka principal as the actor, which
the trail records as ``kafka:<principal>``. The gateway reads only its
configuration's ``audit`` section (never the environment); a key file it cannot
use, or a trail whose last entry is damaged, stops it at start-up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .hooks import audit_credential_store, audit_policy_store, audit_quota_store, kafka_actor
from .settings import AuditConfig
from .trail import AuditTrail, load_key

if TYPE_CHECKING:
    from ..authz.store import PolicyStore
    from ..credentials.store import CredentialStore
    from ..quotas.store import QuotaStore

log = logging.getLogger("kgw.audit")


def attach_audit(
    config: AuditConfig | None,
    *,
    policies: PolicyStore | None = None,
    quotas: QuotaStore | None = None,
    credentials: CredentialStore | None = None,
) -> AuditTrail | None:
    """Hook every given store to the configured trail; ``AuditError`` if it is unusable."""
    if config is None:
        if policies is not None or quotas is not None:
            log.warning(
                "no audit section: ACL and quota changes made through the Kafka admin APIs "
                "are not recorded",
                extra={"event": "audit_off"},
            )
        return None
    key = load_key(config.key_file) if config.key_file is not None else None
    trail = AuditTrail(config.trail, key=key)
    trail.check_appendable()
    if policies is not None:
        audit_policy_store(policies, trail, kafka_actor)
    if quotas is not None:
        audit_quota_store(quotas, trail, kafka_actor)
    if credentials is not None:
        audit_credential_store(credentials, trail, kafka_actor)
    log.info(
        "admin changes are recorded in the audit trail (%s)",
        "keyed" if trail.keyed else "unkeyed",
        extra={"event": "audit_on", "path": str(trail.path)},
    )
    return trail
