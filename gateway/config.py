"""The gateway's configuration: one typed, validated model loaded once at start-up.

A bad file fails with the key path and the reason (``ConfigError``); nothing is
read from the environment behind the operator's back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .accesslog.settings import AccessLogConfig
from .audit.settings import AuditConfig
from .filters.settings import FilterConfig
from .monitoring.settings import MonitoringConfig
from .namespaces.settings import NamespacesConfig
from .observability.settings import MetricsConfig
from .quotas.settings import QuotaConfig
from .redisurl import RedisUrl
from .sasl.settings import SaslConfig
from .tls.settings import ListenerTlsConfig, SniConfig, UpstreamTlsConfig
from .upstream.settings import TenantIdentitiesConfig, UpstreamSaslConfig
from .workers.settings import ServerConfig

Port = Annotated[int, Field(ge=1, le=65535)]
MAX_NODE_ID = 65535


class ConfigError(Exception):
    """The configuration file is unusable; the message names the key path and the reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {value!r}")
    number = int(port)
    if not 1 <= number <= 65535:
        raise ValueError(f"port out of range in {value!r}")
    return host.strip("[]"), number


class UpstreamConfig(_Strict):
    """The private Kafka cluster behind the gateway."""

    bootstrap_servers: list[str] = Field(min_length=1)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    metadata_refresh_s: float = Field(default=30.0, gt=0)
    tls: UpstreamTlsConfig | None = None
    sasl: UpstreamSaslConfig | None = None  # absent: no SASL login to the brokers
    # absent: every connection uses upstream.sasl (decision 0026, docs/broker-enforcement.md)
    tenant_identities: TenantIdentitiesConfig | None = None

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, servers: list[str]) -> list[str]:
        for server in servers:
            _parse_host_port(server)
        return servers

    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        return [_parse_host_port(s) for s in self.bootstrap_servers]


class ListenerConfig(_Strict):
    """One public entry point: a bootstrap port plus one port per broker.

    Broker ``N`` is served on ``broker_port_base + N`` and advertised to clients
    as ``advertised_host:advertised_port_base + N``.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    bind_host: str = "127.0.0.1"
    bootstrap_port: Port
    broker_port_base: Port | None = None  # required unless sni
    advertised_host: str = Field(min_length=1)
    advertised_bootstrap_port: Port | None = None
    advertised_port_base: Port | None = None
    max_node_id: int = Field(default=999, ge=0, le=MAX_NODE_ID)
    principal: str = Field(default="User:ANONYMOUS", pattern=r"^[A-Za-z]+:.+$")
    tls: ListenerTlsConfig | None = None
    sni: SniConfig | None = None
    authentication: Literal["none", "sasl"] = "none"
    principal_from: Literal["sasl", "certificate"] = "sasl"

    @model_validator(mode="after")
    def _check_port_ranges(self) -> ListenerConfig:
        if self.sni is not None:
            if self.tls is None:
                raise ValueError("sni needs tls: the broker is chosen by the TLS server name")
            if self.broker_port_base is not None or self.advertised_port_base is not None:
                raise ValueError(
                    "with sni every broker shares bootstrap_port; drop broker_port_base"
                )
            return self
        if self.broker_port_base is None:
            raise ValueError("broker_port_base is required (or sni, for one port)")
        for base, what in (
            (self.broker_port_base, "broker_port_base"),
            (self.public_port_base, "advertised_port_base"),
        ):
            if base + self.max_node_id > 65535:
                raise ValueError(f"{what} + max_node_id exceeds 65535")
        if self.broker_port_base <= self.bootstrap_port <= self.broker_port_base + self.max_node_id:
            raise ValueError("bootstrap_port falls inside the per-broker port range")
        return self

    @property
    def public_port_base(self) -> int:
        if self.advertised_port_base is not None:
            return self.advertised_port_base
        if self.broker_port_base is None:  # sni: every broker on the bootstrap port
            return self.public_bootstrap_port
        return self.broker_port_base

    @property
    def public_bootstrap_port(self) -> int:
        if self.advertised_bootstrap_port is not None:
            return self.advertised_bootstrap_port
        return self.bootstrap_port


class LimitsConfig(_Strict):
    """Bounds that protect the gateway from misbehaving peers."""

    max_request_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    # SASL listeners, until authentication succeeds (Kafka's 512 KiB unauthenticated cap)
    max_unauthenticated_request_bytes: int = Field(default=512 * 1024, ge=1024)
    max_response_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    max_inflight_requests: int = Field(default=1000, ge=1)
    write_buffer_high_bytes: int = Field(default=4 * 1024 * 1024, ge=16 * 1024)
    idle_timeout_s: float = Field(default=600.0, gt=0)


class ShutdownConfig(_Strict):
    drain_timeout_s: float = Field(default=30.0, ge=0)


class LoggingConfig(_Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = "json"


PrincipalName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*:\S(?:.*\S)?$")]


class PolicyNoticesConfig(_Strict):
    """Redis pub/sub: an instance that changes the policy tells the others at once."""

    url: RedisUrl
    channel: str = Field(default="kgw:policy", min_length=1)


class AuthorizationConfig(_Strict):
    """Kafka ACLs as casbin policies (docs/authorization.md). Absent: no authorization."""

    policy_dir: Path = Path("policies")
    model_file: str = Field(default="model.conf", min_length=1)
    policy_file: str = Field(default="policy.csv", min_length=1)
    super_users: list[PrincipalName] = []
    reload_interval_s: float = Field(default=0.25, gt=0, le=60)
    cache_size: int = Field(default=100_000, ge=0)
    redis: PolicyNoticesConfig | None = None
    # false: no gateway checks, the brokers alone decide (tests; needs tenant identities)
    gateway_checks: bool = True


class GatewayConfig(_Strict):
    """The whole configuration file."""

    upstream: UpstreamConfig
    listeners: list[ListenerConfig] = Field(min_length=1)
    limits: LimitsConfig = LimitsConfig()
    shutdown: ShutdownConfig = ShutdownConfig()
    logging: LoggingConfig = LoggingConfig()
    authorization: AuthorizationConfig | None = None
    quotas: QuotaConfig | None = None
    accesslog: AccessLogConfig | None = None  # absent: no access log
    metrics: MetricsConfig | None = None  # absent: no metrics endpoint
    sasl: SaslConfig | None = None  # absent: no SASL mechanisms (docs/sasl.md)
    audit: AuditConfig | None = None  # absent: admin changes are not audited (docs/audit.md)
    filters: list[FilterConfig] = []  # operators' own filters, in order (docs/filters.md)
    monitoring: MonitoringConfig | None = None  # absent: no service monitoring (docs/monitoring.md)
    namespaces: NamespacesConfig | None = None  # transparent names (docs/namespaces.md)
    server: ServerConfig = ServerConfig()  # worker processes (decision 0030)

    @model_validator(mode="after")
    def _check_listeners(self) -> GatewayConfig:
        names = [listener.name for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ValueError("listener names must be unique")
        for listener in self.listeners:
            if listener.authentication == "sasl" and self.sasl is None:
                raise ValueError(
                    f"listener {listener.name!r} uses SASL but there is no sasl section"
                )
        taken: list[tuple[str, int, int, str]] = []
        for lst in self.listeners:
            ranges = [(lst.bootstrap_port, lst.bootstrap_port)]
            if lst.broker_port_base is not None:
                ranges.append((lst.broker_port_base, lst.broker_port_base + lst.max_node_id))
            for low, high in ranges:
                for other_host, o_low, o_high, other in taken:
                    overlaps = low <= o_high and o_low <= high
                    if overlaps and _same_bind(lst.bind_host, other_host):
                        raise ValueError(f"ports of listener {lst.name!r} overlap {other!r}")
            taken.extend((lst.bind_host, low, high, lst.name) for low, high in ranges)
        return self

    @model_validator(mode="after")
    def _check_tenant_identities(self) -> GatewayConfig:
        tenants = self.upstream.tenant_identities
        enabled = tenants is not None and tenants.enabled
        if enabled and (self.upstream.sasl is None or self.authorization is None):
            raise ValueError(
                "upstream.tenant_identities needs upstream.sasl (the gateway's admin login "
                "that provisions them) and authorization (the policy the brokers mirror)"
            )
        checks_off = self.authorization is not None and not self.authorization.gateway_checks
        if checks_off and not enabled:
            raise ValueError(
                "authorization.gateway_checks: false is refused unless "
                "upstream.tenant_identities is enabled (the brokers must decide instead)"
            )
        return self

    @model_validator(mode="after")
    def _check_monitoring(self) -> GatewayConfig:
        canary = self.monitoring.canary if self.monitoring is not None else None
        names = [listener.name for listener in self.listeners]
        if canary is not None and canary.listener is not None and canary.listener not in names:
            raise ValueError(f"monitoring.canary.listener {canary.listener!r} is not a listener")
        _check_namespace_prefix(self)
        return self


def _check_namespace_prefix(config: GatewayConfig) -> None:
    """Transparent names must use the prefix tenant names are checked against (the
    quotas' ``topic_prefix``): with ``{tenant}-`` there and ``{tenant}.`` here, tenant
    ``acme`` would reach tenant ``acme-eu``'s names (``eu-orders``) as its own."""
    if config.namespaces is None:
        return
    expected = config.quotas.topic_prefix if config.quotas is not None else "{tenant}."
    if config.namespaces.prefix_format != expected:
        raise ValueError(
            f"namespaces.prefix_format {config.namespaces.prefix_format!r} must be the "
            f"quotas' topic_prefix {expected!r} (tenant names are checked against it)"
        )


def _same_bind(a: str, b: str) -> bool:
    return a == b or "0.0.0.0" in (a, b) or "::" in (a, b)


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "<root>"
        lines.append(f"{path}: {err['msg']}")
    return "; ".join(lines)


def parse_config(data: object, source: str = "<config>") -> GatewayConfig:
    """Validate an already-parsed YAML document."""
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_format_errors(exc)}") from None


def load_config(path: Path) -> GatewayConfig:
    """Read and validate a YAML configuration file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: <root>: expected a mapping of settings")
    return parse_config(data, str(path))
