"""The composition root: every listener, the shared topology and stores, the tasks.

``Gateway`` builds what the configuration asks for, starts the listeners and the
background loops (``loops``), and stops by draining its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from ..accesslog import AccessLog, build_access_log
from ..accesslog.records import default_instance
from ..addresses.topology import Topology
from ..config import GatewayConfig
from ..core import CoreServices
from ..filters.loader import build_chain
from ..identity import ClientIdentity
from ..observability import GatewayMetrics, ObservabilityServer
from ..observability import serve as serve_observability
from ..sasl.gate import LoginGate
from ..sasl.settings import shared_failures_url
from ..tls.reloader import Reloadable
from ..tls.upstream import upstream_context
from ..upstream.api_versions_cache import ApiVersionsCache
from ..upstream.client import BrokerClient, BrokerUnavailable
from ..upstream.identity import UpstreamIdentity
from ..upstream.provision import AdminUnavailable
from .listeners import ListenerSet
from .sessions import new_session
from .supervisor import Supervisor, start_background
from .upstream import UpstreamLogin, UpstreamRefused

if TYPE_CHECKING:
    from ..authz.engine import Authorizer
    from ..quotas import QuotaEngine
    from ..quotas.cluster_view import ClusterTopics
    from ..sasl import FailureLimiter, SaslServer
    from ..sasl.shared_failures import SharedFailures
    from ..session import Session
    from ..tenants import TenantWatch
    from .client import ClientConnection

log = logging.getLogger("kgw.server")


class Gateway:
    """All listeners, the shared topology, and the background tasks."""

    def __init__(self, config: GatewayConfig, reuse_port: bool = False) -> None:
        self.config = config
        self.reuse_port = reuse_port  # a worker among several on the same ports (decision 0030)
        self._init_broker_client(config)
        self.topology = Topology(on_new_broker=self._on_new_broker)
        self.sasl_server: SaslServer | None = None
        self.auth_limiter: FailureLimiter | None = None
        if config.sasl is not None:
            from ..sasl import SaslServer

            self.sasl_server = SaslServer.from_config(config.sasl)
            self.auth_limiter = self.sasl_server.limiter
        self.shared_failures: SharedFailures | None = None
        failures_url = shared_failures_url(config)
        if self.auth_limiter is not None and failures_url is not None:
            from ..sasl.shared_failures import SharedFailures

            self.shared_failures = SharedFailures(self.auth_limiter, failures_url)
        self.accesslog: AccessLog | None = None
        self.metrics: GatewayMetrics | None = None
        self.metrics_server: ObservabilityServer | None = None
        self.instance = default_instance()
        if config.accesslog is not None:
            self.accesslog = build_access_log(config.accesslog, self.broker_client)
            self.instance = config.accesslog.instance or self.instance
        if config.metrics is not None and config.metrics.enabled:
            self.metrics = GatewayMetrics(max_tenants=config.metrics.max_tenants)
            if self.accesslog is not None:
                self.metrics.watch_access_log(self.accesslog.stats)
        self.quotas: QuotaEngine | None = None
        self.cluster_topics: ClusterTopics | None = None
        if config.quotas is not None:
            from ..quotas import QuotaEngine

            self.quotas = QuotaEngine.from_config(config.quotas)
            self._watch_quotas(self.quotas)
        self.authorizer: Authorizer | None = None  # None: sessions get no Enforcer
        self.policy: Authorizer | None = None  # the policy, for the gateway or the brokers
        if config.authorization is not None:
            from ..authz.engine import Authorizer

            self.policy = Authorizer.from_config(config.authorization)
            if config.authorization.gateway_checks:
                self.authorizer = self.policy
        self.tenants: TenantWatch | None = None  # suspended/deleted tenants (gateway/tenants)
        if config.sasl is not None and config.sasl.credential_store is not None:
            from ..tenants import TenantWatch, open_tenant_store

            self.tenants = TenantWatch(open_tenant_store(config.sasl.credential_store))
        from ..audit.wiring import attach_audit

        self.audit = attach_audit(  # Kafka admin API changes → the audit trail
            config.audit,
            policies=self.policy.store if self.policy is not None else None,
            quotas=self.quotas.store if self.quotas is not None else None,
            credentials=self.sasl_server.store if self.sasl_server is not None else None,
        )
        from ..namespaces.wiring import namespace_filters

        # the namespace filter first (outermost), then the operators' (docs/filters.md)
        self.filters = build_chain(config.filters, first=namespace_filters(config, self.tenants))
        self.core_services = CoreServices(
            max_inflight=config.limits.max_inflight_requests,
            auth_timeout_s=config.sasl.auth_timeout_s if config.sasl is not None else 0.0,
            gate=LoginGate(self.auth_limiter, self.tenants),
            quotas=self.quotas,
        )
        self.listeners = [ListenerSet(self, lst) for lst in config.listeners]
        self.connections: set[ClientConnection] = set()
        self.supervisor = Supervisor()
        self.stopping = False
        self.cluster_reachable = False
        self._drained = asyncio.Event()
        self.api_versions = ApiVersionsCache(
            self._fetch_api_versions, config.upstream.metadata_refresh_s
        )
        self._init_tenant_identities(config)

    def _init_broker_client(self, config: GatewayConfig) -> None:
        """The gateway's own upstream TLS and SASL identity, and the one client that uses
        them for all its broker traffic (decision 0027)."""
        tls = config.upstream.tls
        self.upstream_tls_material = upstream_context(tls) if tls is not None else None
        sasl = config.upstream.sasl  # UpstreamCredentialError: no usable password file
        self.upstream_identity = UpstreamIdentity.load(sasl) if sasl is not None else None
        self.broker_client = BrokerClient(
            config.upstream.bootstrap_addresses(),
            tls=self.upstream_tls_material,
            identity=self.upstream_identity,
            timeout_s=config.upstream.connect_timeout_s,
        )

    def _init_tenant_identities(self, config: GatewayConfig) -> None:
        """``upstream.tenant_identities``: per-tenant broker logins and broker ACLs."""
        from ..upstream.broker_enforcement import BrokerEnforcement

        self.broker_enforcement: BrokerEnforcement | None = None
        settings = config.upstream.tenant_identities
        if settings is not None and settings.enabled and self.policy is not None:
            self.broker_enforcement = BrokerEnforcement.create(
                settings, config, self.policy, self.admin_call,
                self.metrics.registry if self.metrics is not None else None,
            )  # fmt: skip
        elif config.upstream.sasl is not None and self.policy is not None:
            log.warning(
                "upstream.tenant_identities is off: every tenant reaches the brokers as the "
                "gateway's own identity, and only the gateway's checks separate tenants",
                extra={"event": "broker_enforcement_off"},
            )
        if config.authorization is not None and not config.authorization.gateway_checks:
            log.warning(
                "authorization.gateway_checks is false: the GATEWAY DOES NOT AUTHORIZE "
                "requests, only the brokers' ACLs do (a test switch, not for production)",
                extra={"event": "gateway_checks_off"},
            )

    async def upstream_login(
        self, identity: ClientIdentity, force: bool = False
    ) -> UpstreamLogin | None:
        """Who a client connection is to the brokers: its tenant's upstream principal, or
        the gateway's own identity for super users (and when tenant identities are off).
        ``UpstreamRefused`` for anyone else (deny by default, decision 0026)."""
        enforcement = self.broker_enforcement
        if enforcement is None:
            return self.upstream_identity
        principal = identity.principal
        if principal in enforcement.super_users:
            return self.upstream_identity
        tenant = identity.tenant or enforcement.tenant_of(principal)
        if tenant is None:
            raise UpstreamRefused(f"{principal} belongs to no tenant: no broker identity")
        if self.tenants is not None and self.tenants.blocked(tenant):
            raise UpstreamRefused(f"tenant {tenant} is suspended or deleted")
        return await enforcement.identities.login(tenant, force)

    async def admin_call(self, request: Any, response_type: type[Any]) -> Any:
        """One admin request as the gateway's own identity, to the first broker that answers."""
        try:
            return await self.broker_client.ask(request, response_type)
        except BrokerUnavailable as exc:
            raise AdminUnavailable(
                f"no broker answered {type(request).__name__} ({exc.reason})"
            ) from None

    async def _fetch_api_versions(self, request: bytes) -> bytes:
        """The cluster's answer to a client's ApiVersions frame (``ApiVersionsCache``)."""
        try:
            return await self.broker_client.ask_raw(request)
        except BrokerUnavailable as exc:
            raise OSError(f"no broker answered ApiVersions: {exc.reason}") from None

    def _watch_quotas(self, quotas: QuotaEngine) -> None:
        """The cluster's topic list for licence checks; quota figures on /metrics."""
        from ..quotas.cluster_view import ClusterTopics
        from ..quotas.prometheus import QuotaCollector

        self.cluster_topics = ClusterTopics(self.broker_client)
        if self.metrics is not None:
            self.metrics.registry.register(QuotaCollector(quotas.metrics))

    def tls_material(self) -> list[Reloadable]:
        found = [lst.tls.material for lst in self.listeners if lst.tls is not None]
        if self.upstream_tls_material is not None:
            found.append(self.upstream_tls_material)
        return found

    def upstream_tls(self) -> dict[str, Any]:
        """Keyword arguments for a new broker connection (TLS with the current context)."""
        return self.broker_client.connect_kwargs()

    def reload(self) -> None:
        """SIGHUP: reload TLS material (new connections only; bad material is refused)."""
        for material in self.tls_material():
            material.reload("SIGHUP")

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A named, supervised task (``supervisor.Supervisor.spawn``)."""
        return self.supervisor.spawn(name, coro)

    def forget(self, conn: ClientConnection) -> None:
        self.connections.discard(conn)
        if self.stopping and not self.connections:
            self._drained.set()

    def close_tenants(self, blocked: frozenset[str]) -> None:
        for conn in list(self.connections):
            if conn.identity.tenant in blocked:
                conn.close(f"tenant {conn.identity.tenant} is suspended or deleted", "gateway")

    def new_session(
        self, listener: ListenerSet, identity: ClientIdentity, observe: bool
    ) -> Session:
        return new_session(self, listener, identity, observe)

    def open_broker_listener(self, node_id: int) -> None:
        """A broker is known now: every listener gives it its public port."""
        self._on_new_broker(node_id)

    def _on_new_broker(self, node_id: int) -> None:
        for listener in self.listeners:
            listener.ensure_broker(node_id)

    def upstream_candidates(self, node_id: int | None) -> list[tuple[str, int]]:
        if node_id is not None:
            address = self.topology.address(node_id)
            return [address] if address is not None else []
        return self.broker_client.bootstrap()

    async def start(self) -> None:
        for listener in self.listeners:
            await listener.open(None)
        if self.metrics is not None and self.config.metrics is not None:
            checks = {
                "cluster": lambda: self.cluster_reachable,
                "policies": lambda: self.policy is None or self.policy.version > 0,
            }
            self.metrics_server = serve_observability(self.config.metrics, self.metrics, checks)
            await self.metrics_server.start()
        if self.policy is None:
            log.warning(
                "authorization is off: every client may do anything the gateway's own identity may",
                extra={"event": "authorization_off"},
            )
        start_background(self)

    def request_stop(self) -> None:
        if not self.supervisor.stop.is_set():
            log.info("stop requested", extra={"event": "stop_requested"})
            self.supervisor.stop.set()

    async def wait_stopped(self) -> None:
        await self.supervisor.stop.wait()

    async def drain(self) -> None:
        """Stop accepting, let in-flight responses reach their clients, then close."""
        self.stopping = True
        self.supervisor.stop.set()
        for listener in self.listeners:
            listener.close()
        for conn in list(self.connections):
            conn.begin_drain()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), self.config.shutdown.drain_timeout_s)
        for conn in list(self.connections):
            conn.close("drain timeout", "gateway")
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.accesslog is not None:
            await self.accesslog.close(5)
        if self.sasl_server is not None:
            await self.sasl_server.close()
        self.supervisor.cancel_all()
        log.info("gateway stopped", extra={"event": "stopped"})
