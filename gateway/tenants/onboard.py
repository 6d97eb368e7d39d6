"""Creating, suspending, resuming and deleting a tenant, through the existing stores.

Every change goes through the store that owns it (policies: ``PolicyStore``;
plan: ``QuotaStore``; API keys: ``CredentialStore``; certificates: the CA;
tenant records: ``TenantStore``), names its ``actor`` and so reaches each store's
hooks (the audit trail). ``create`` is all or nothing: each step registers how to
undo it and a failure undoes the steps already done, in reverse, before the error
is raised. Secrets are returned to the caller and written into the bundle; they
are never logged.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..authz.model import AclFilter, PatternFilter
from ..authz.store import PolicyError, PolicyStore
from ..config import GatewayConfig, ListenerConfig
from ..credentials import CredentialStore
from ..quotas.store import QuotaStore
from . import bundle
from .certificates import issue_client_certificate, revoke_certificates
from .model import (
    NamespaceMode,
    Tenant,
    TenantError,
    TenantState,
    check_name,
    namespace,
    namespace_rules,
    overlapping,
    principal_for,
    role_filter,
    role_for,
)
from .store import TenantStore

log = logging.getLogger("kgw.tenants")
Undo = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class Stores:
    """The stores one gateway configuration names (opened by the caller)."""

    config: GatewayConfig
    credentials: CredentialStore
    tenants: TenantStore
    policies: PolicyStore
    quotas: QuotaStore
    notify: Callable[[], None] = lambda: None  # tell gateways the policy changed
    # changes outside the stores (certificates): (actor, action, target, before, after)
    record: Callable[[str, str, str, Any, Any], None] = lambda *change: None


@dataclass(frozen=True, slots=True)
class CertificateRequest:
    ca_dir: Path
    ca_password: bytes | None = None
    days: int = 397


@dataclass(slots=True)
class Created:
    tenant: Tenant
    key_id: str
    secret: str
    bundle_dir: Path | None
    files: list[Path] = field(default_factory=list)


@dataclass(slots=True)
class Deleted:
    tenant: Tenant
    revoked_keys: list[str]
    removed_scram: list[str]
    removed_rules: int
    removed_members: int
    certificates_revoked: list[str]
    topics_kept: list[str]
    topics_deleted: list[str]
    topics_failed: dict[str, str]
    topics_unlisted: str | None = None  # why the kept topics could not be listed


def check_transparent(config: GatewayConfig, listener: str) -> None:
    """Transparent names need the gateways to map them: a ``namespaces`` section that
    covers ``listener``. Without it the tenant's plain names would fall outside its
    namespace and its bundle would promise what the gateways do not do."""
    spaces = config.namespaces
    if spaces is None:
        raise TenantError(
            "transparent names need a namespaces: section in the configuration "
            "(docs/namespaces.md); nothing was changed"
        )
    if spaces.listeners and listener not in spaces.listeners:
        raise TenantError(
            f"namespaces.listeners leaves out listener {listener!r}: its clients would see "
            "cluster-side names; nothing was changed"
        )


def topic_prefix_format(config: GatewayConfig) -> str:
    return config.quotas.topic_prefix if config.quotas is not None else "{tenant}."


def sasl_listener(config: GatewayConfig, name: str | None) -> ListenerConfig:
    """The listener the tenant connects to: ``name``, else the first with SASL."""
    candidates = [lst for lst in config.listeners if lst.authentication == "sasl"]
    if name is not None:
        candidates = [lst for lst in candidates if lst.name == name]
        if not candidates:
            raise TenantError(f"no SASL listener named {name!r} in the configuration")
    if not candidates:
        raise TenantError("the configuration has no SASL listener: tenants connect with API keys")
    return candidates[0]


def bootstrap_of(listener: ListenerConfig) -> str:
    host = listener.advertised_host
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{listener.public_bootstrap_port}"


def _check_bundle_dir(bundle_dir: Path | None) -> None:
    if bundle_dir is not None and bundle_dir.exists() and any(bundle_dir.iterdir()):
        raise TenantError(f"{bundle_dir} exists and is not empty; choose a new bundle directory")


def known_plans(stores: Stores) -> set[str]:
    configured = set(stores.config.quotas.plans) if stores.config.quotas is not None else set()
    return configured | set(stores.quotas.load().plans)


class _Steps:
    """Undo actions of the steps done so far; ``rollback`` runs them newest first."""

    def __init__(self) -> None:
        self.undo: list[tuple[str, Undo]] = []

    def done(self, what: str, undo: Undo) -> None:
        self.undo.append((what, undo))

    async def rollback(self) -> list[str]:
        failed = []
        for what, undo in reversed(self.undo):
            try:
                await undo()
            except Exception as exc:  # keep undoing the rest
                log.error(
                    "tenant rollback step failed: %s",
                    what,
                    extra={"event": "tenant_rollback_failed", "reason": type(exc).__name__},
                )
                failed.append(what)
        return failed


async def create(
    stores: Stores,
    name: str,
    plan: str,
    *,
    actor: str,
    bundle_dir: Path | None,
    listener: str | None = None,
    server_ca: Path | None = None,
    certificate: CertificateRequest | None = None,
    names: NamespaceMode = "prefixed",
) -> Created:
    """``names``: ``transparent`` gives the tenant plain names (gateway/namespaces): its
    bundle's examples use them, gateways map them to its prefix."""
    config = stores.config
    prefix_format = topic_prefix_format(config)
    check_name(name, prefix_format)
    if config.quotas is None:
        raise TenantError("the configuration has no quotas section: a plan cannot be assigned")
    if config.authorization is None:
        raise TenantError(
            "the configuration has no authorization section: nothing would confine "
            "the tenant to its namespace"
        )
    chosen = sasl_listener(config, listener)
    if plan not in known_plans(stores):
        raise TenantError(f"no plan {plan!r} (configured or in the quota store)")
    if certificate is not None and chosen.tls is None:
        raise TenantError(f"listener {chosen.name!r} has no TLS: a client certificate needs mTLS")
    if names == "transparent":
        check_transparent(config, chosen.name)
    _check_bundle_dir(bundle_dir)
    prefix = namespace(name, prefix_format)
    existing = await stores.tenants.all()
    current = existing.get(name)
    if current is not None and current.state != "deleted":
        raise TenantError(f"tenant {name!r} exists ({current.state}); nothing was changed")
    live = {n: t.prefix for n, t in existing.items() if n != name and t.state != "deleted"}
    clash = overlapping(prefix, live)
    if clash is not None:
        raise TenantError(f"namespace {prefix!r} overlaps tenant {clash!r}'s ({live[clash]!r})")

    steps = _Steps()
    try:
        return await _create_steps(
            stores,
            steps,
            name,
            plan,
            prefix,
            actor,
            chosen,
            bundle_dir,
            server_ca,
            certificate,
            names,
        )
    except BaseException as exc:
        failed = await steps.rollback()
        if failed:
            left = ", ".join(failed)
            raise TenantError(f"creating {name!r} failed ({exc}); could not undo: {left}") from exc
        if isinstance(exc, TenantError):
            raise
        if isinstance(exc, Exception):
            raise TenantError(f"creating {name!r} failed and was undone: {exc}") from exc
        raise


async def _create_steps(
    stores: Stores,
    steps: _Steps,
    name: str,
    plan: str,
    prefix: str,
    actor: str,
    listener: ListenerConfig,
    bundle_dir: Path | None,
    server_ca: Path | None,
    certificate: CertificateRequest | None,
    names: NamespaceMode = "prefixed",
) -> Created:
    role, principal = role_for(name), principal_for(name)
    added = stores.policies.add(namespace_rules(name, prefix), actor)

    async def drop_rules() -> None:
        for rule in added:
            stores.policies.remove(
                AclFilter(
                    rule.principal, rule.resource_type, PatternFilter(int(rule.pattern_type)),
                    rule.name, rule.operation, rule.host, rule.permission,
                ),
                actor,
            )  # fmt: skip
        stores.notify()

    steps.done("policy rules", drop_rules)
    if stores.policies.add_role_member(principal, role, actor):

        async def drop_member() -> None:
            stores.policies.remove_role_member(principal, role, actor)
            stores.notify()

        steps.done("role membership", drop_member)
    stores.notify()

    previous = stores.quotas.load().assignments.get(name)
    stores.quotas.assign(name, plan, actor)

    async def unassign() -> None:
        stores.quotas.assign(name, previous, actor)

    steps.done("plan assignment", unassign)

    key, secret = await stores.credentials.create_api_key(
        principal=principal, tenant=name, actor=actor, description=f"tenant {name} (kgw tenant)"
    )

    async def revoke() -> None:
        await stores.credentials.revoke_api_key(key.key_id, actor=actor)

    steps.done("API key", revoke)

    files: dict[str, str] = {}
    binary: dict[str, bytes] = {}
    cert_names: tuple[str, ...] = ()
    client_cert: bundle.ClientCertificate | None = None
    if certificate is not None:
        client_cert, binary, cert_name = issue_client_certificate(certificate, name, principal)
        target = f"cert:{certificate.ca_dir.name}/{cert_name}"
        issued = {"kind": "client", "principal": principal, "tenant": name, "state": "valid"}
        stores.record(actor, "cert.issue", target, None, issued)

        async def revoke_cert() -> None:
            from ..tls.ca import CertificateAuthority

            ca = CertificateAuthority(certificate.ca_dir, certificate.ca_password)
            ca.revoke(cert_name, "cessation_of_operation")
            revoked = {**issued, "state": "revoked", "reason": "cessation_of_operation"}
            stores.record(actor, "cert.revoke", target, issued, revoked)

        steps.done("client certificate", revoke_cert)
        cert_names = (cert_name,)
    ca_name = None
    if server_ca is not None and listener.tls is not None:
        ca_name = "gateway-ca.pem"
        binary[ca_name] = _read(server_ca)
    spec = bundle.BundleSpec(
        tenant=name, plan=plan, prefix=prefix, bootstrap=bootstrap_of(listener),
        tls=listener.tls is not None, key_id=key.key_id, secret=secret, server_ca=ca_name,
        certificate=client_cert, transparent=names == "transparent",
    )  # fmt: skip
    files = bundle.render(spec)
    written: list[Path] = []
    if bundle_dir is not None:
        existed = _exists(bundle_dir)

        async def remove_bundle() -> None:
            if existed:
                for path in written:
                    path.unlink(missing_ok=True)
            else:
                shutil.rmtree(bundle_dir, ignore_errors=True)

        steps.done("bundle directory", remove_bundle)
        written = bundle.write(bundle_dir, files)
        written += _write_binary(bundle_dir, binary)

    tenant = Tenant(
        name=name, plan=plan, prefix=prefix, api_keys=(key.key_id,), certificates=cert_names,
        namespace=names,
    )  # fmt: skip
    await stores.tenants.put(tenant, actor=actor, action="tenant.create")
    return Created(tenant, key.key_id, secret, bundle_dir, written)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TenantError(f"cannot read {path}: {exc.strerror}") from None


def _exists(path: Path) -> bool:
    return path.exists()


def _write_binary(directory: Path, files: dict[str, bytes]) -> list[Path]:
    import os

    written = []
    for file_name, data in files.items():
        path = directory / file_name
        mode = 0o644 if file_name.endswith("ca.pem") else 0o600
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        written.append(path)
    return written


async def set_names(stores: Stores, name: str, names: NamespaceMode, *, actor: str) -> Tenant:
    """Switch the tenant between prefixed and transparent names (idempotent). No data moves:
    the cluster-side names are the same; gateways apply it within a second, to requests
    that arrive after it (its clients should reconnect)."""
    tenant = await stores.tenants.get(name)
    if tenant is None or tenant.state == "deleted":
        raise TenantError(f"no tenant {name!r}")
    if tenant.namespace == names:
        return tenant
    if names == "transparent" and stores.config.namespaces is None:
        check_transparent(stores.config, "")
    changed = replace(tenant, namespace=names, changed_at=time.time())
    await stores.tenants.put(changed, actor=actor, action=f"tenant.names.{names}")
    return changed


async def set_state(stores: Stores, name: str, state: TenantState, *, actor: str) -> Tenant:
    """Suspend or resume (idempotent); gateways act on it within a second."""
    tenant = await stores.tenants.get(name)
    if tenant is None:
        raise TenantError(f"no tenant {name!r}")
    if tenant.state == "deleted":
        raise TenantError(f"tenant {name!r} is deleted; create it again instead")
    if tenant.state == state:
        return tenant
    changed = tenant.with_state(state)
    action = "tenant.suspend" if state == "suspended" else "tenant.resume"
    await stores.tenants.put(changed, actor=actor, action=action)
    return changed


async def delete(
    stores: Stores,
    name: str,
    *,
    actor: str,
    delete_data: bool,
    ca_dir: Path | None = None,
    ca_password: bytes | None = None,
) -> Deleted:
    """Block the tenant, revoke its credentials, remove its grants and plan; data on request.

    The record stays with state ``deleted`` (gateways keep refusing and closing its
    connections; ``create`` may reuse the name).
    """
    from .cluster import delete_topics, tenant_topics

    tenant = await stores.tenants.get(name)
    if tenant is None:
        raise TenantError(f"no tenant {name!r}")
    topics: list[str] | None = None
    if delete_data:  # listed before any change: a cluster out of reach changes nothing
        topics = await tenant_topics(stores.config, tenant.prefix)
    blocked = tenant.with_state("deleted")
    await stores.tenants.put(blocked, actor=actor, action="tenant.delete")
    revoked = []
    for key in await stores.credentials.list_api_keys():
        if key.tenant == name and key.state != "revoked":
            await stores.credentials.revoke_api_key(key.key_id, actor=actor)
            revoked.append(key.key_id)
    removed_scram = []
    for credential in await stores.credentials.list_scram():
        if credential.tenant == name:
            await stores.credentials.remove_scram(
                credential.user, (credential.mechanism,), actor=actor
            )
            removed_scram.append(f"{credential.mechanism}:{credential.user}")
    try:
        rules = stores.policies.remove(role_filter(name), actor)
        role = role_for(name)
        members = [m for m in stores.policies.memberships() if role in (m.role, m.member)]
        for membership in members:
            stores.policies.remove_role_member(membership.member, membership.role, actor)
    except PolicyError as exc:
        raise TenantError(f"removing {name!r}'s policies failed: {exc}") from None
    stores.notify()
    stores.quotas.assign(name, None, actor)
    certs = revoke_certificates(tenant, ca_dir, ca_password)
    for cert_name in certs:  # revoked only with a ca_dir
        before = {"kind": "client", "tenant": name, "state": "valid"}
        after = {**before, "state": "revoked", "reason": "cessation_of_operation"}
        where = ca_dir.name if ca_dir is not None else "?"
        stores.record(actor, "cert.revoke", f"cert:{where}/{cert_name}", before, after)
    unlisted = None
    if topics is None:  # only to say what was kept: the deletion stands without it
        try:
            topics = await tenant_topics(stores.config, tenant.prefix)
        except TenantError as exc:
            topics, unlisted = [], str(exc)
    deleted: list[str] = []
    failed: dict[str, str] = {}
    if delete_data:
        for topic, error in (await delete_topics(stores.config, topics)).items():
            if error is None:
                deleted.append(topic)
            else:
                failed[topic] = error
    kept = [t for t in topics if t not in deleted]
    return Deleted(
        blocked,
        revoked,
        removed_scram,
        len(rules),
        len(members),
        certs,
        kept,
        deleted,
        failed,
        unlisted,
    )
