"""Keeps the brokers' ACLs for the per-tenant upstream principals in step with the policy.

The thin async side of ``authz.broker_acls``: read the brokers' ACLs (DescribeAcls),
compare the ones it owns with what the policy asks for, apply the difference
(CreateAcls, DeleteAcls), all through the gateway's admin login. It runs at start, when
the policy's version changes (checked every ``POLL_S``) and every
``acl_sync_interval_s``. When the owned ACLs differ from what it wrote last time,
someone changed them behind its back: one ``broker_acl_drift`` line with the counts,
``kgw_broker_acl_drift_total``, and the sync restores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsRequest
from kio.schema.delete_acls.v3.response import DeleteAclsResponse
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import DescribeAclsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8
from prometheus_client import CollectorRegistry, Counter

from ..authz.broker_acls import AclDiff, creation, deletion, described, diff, managed
from ..authz.model import AclRule
from .provision import AdminCall

log = logging.getLogger("kgw.upstream")
POLL_S = 0.25
ANY = i8(1)


class AclSyncError(Exception):
    """The brokers refused a DescribeAcls, CreateAcls or DeleteAcls."""


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    created: int
    deleted: int
    drift_missing: int
    drift_extra: int


class BrokerAclSync:
    def __init__(
        self,
        desired: Callable[[], frozenset[AclRule]],
        admin: AdminCall,
        user_prefix: str,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._desired = desired
        self._admin = admin
        self._prefix = user_prefix
        self.last_written: frozenset[AclRule] | None = None
        self.syncs = 0
        self._drift = Counter(
            "kgw_broker_acl_drift",
            "Broker ACLs of upstream principals found changed behind the gateway's back",
            ["kind"],
            registry=registry,
        )
        self._changes = Counter(
            "kgw_broker_acl_changes",
            "Broker ACLs the gateway created or deleted to follow the policy",
            ["action"],
            registry=registry,
        )

    async def describe(self) -> frozenset[AclRule]:
        request = DescribeAclsRequest(
            resource_type_filter=ANY,
            resource_name_filter=None,
            pattern_type_filter=ANY,
            principal_filter=None,
            host_filter=None,
            operation=ANY,
            permission_type=ANY,
        )
        response = await self._admin(request, DescribeAclsResponse)
        if response.error_code != ErrorCode.none:
            raise AclSyncError(f"DescribeAcls: {response.error_code.name}")
        return managed(described(response.resources), self._prefix)

    async def sync_once(self) -> SyncOutcome:
        desired = self._desired()
        actual = await self.describe()
        missing = extra = 0
        if self.last_written is not None and actual != self.last_written:
            missing = len(self.last_written - actual)
            extra = len(actual - self.last_written)
            self._drift.labels("missing").inc(missing)
            self._drift.labels("extra").inc(extra)
            log.warning(
                "broker ACLs changed behind the gateway's back: %d missing, %d unexpected; "
                "restoring",
                missing,
                extra,
                extra={
                    "event": "broker_acl_drift",
                    "count": missing + extra,
                    "reason": f"{missing} missing, {extra} unexpected",
                },
            )
        change = diff(desired, actual)
        await self._apply(change)
        self.last_written = desired
        self.syncs += 1
        if not change.empty:
            log.info(
                "broker ACLs synced: %d created, %d deleted",
                len(change.create),
                len(change.delete),
                extra={
                    "event": "broker_acls_synced",
                    "count": len(desired),
                    "reason": f"{len(change.create)} created, {len(change.delete)} deleted",
                },
            )
        return SyncOutcome(len(change.create), len(change.delete), missing, extra)

    async def _apply(self, change: AclDiff) -> None:
        if change.create:
            ordered = sorted(change.create, key=str)
            created = await self._admin(
                CreateAclsRequest(creations=tuple(creation(r) for r in ordered)),
                CreateAclsResponse,
            )
            errors = [r for r in created.results if r.error_code != ErrorCode.none]
            if errors:
                raise AclSyncError(f"CreateAcls: {errors[0].error_code.name}")
            self._changes.labels("create").inc(len(ordered))
        if change.delete:
            ordered = sorted(change.delete, key=str)
            deleted = await self._admin(
                DeleteAclsRequest(filters=tuple(deletion(r) for r in ordered)),
                DeleteAclsResponse,
            )
            errors = [r for r in deleted.filter_results if r.error_code != ErrorCode.none]
            if errors:
                raise AclSyncError(f"DeleteAcls: {errors[0].error_code.name}")
            self._changes.labels("delete").inc(len(ordered))

    async def run(
        self, stop: asyncio.Event, version: Callable[[], object], interval_s: float
    ) -> None:
        """Sync at start, on every policy version, and every ``interval_s``."""
        loop = asyncio.get_running_loop()
        synced_version: object = None
        due = loop.time()
        failing = False
        while not stop.is_set():
            current = version()
            may_retry = not failing or loop.time() >= due
            if may_retry and (current != synced_version or loop.time() >= due):
                try:
                    await self.sync_once()
                except Exception as exc:  # broker down, refused: retry on the next round
                    if not failing:
                        log.warning(
                            "broker ACL sync failed: %s",
                            exc,
                            extra={"event": "broker_acl_sync_failed", "reason": str(exc)},
                        )
                    failing = True
                    due = loop.time() + 1.0
                else:
                    failing = False
                    synced_version = current
                    due = loop.time() + interval_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL_S)
