"""The TLS sections of the configuration (``listeners[].tls``, ``listeners[].sni``,
``upstream.tls``), validated with the rest of ``gateway/config.py``.

Only the shape is checked here; the files themselves (readable, key matching
certificate, not expired, CRL signed by its CA) are checked by ``material`` when
the gateway starts and on every reload.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .ciphersuites import check_names
from .principal import RuleError, parse_rules

TlsVersion = Literal["TLSv1.2", "TLSv1.3"]

DEFAULT_CIPHERS = (
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
)
"""TLS 1.2 suites: forward secret AEAD only (Mozilla's "intermediate" list).
TLS 1.3 suites are OpenSSL's, all AEAD, unless ``tls13_ciphersuites`` narrows them."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientCaConfig(_Strict):
    """One CA whose certificates may authenticate clients (typically one per tenant)."""

    ca_file: Path
    crl_file: Path | None = None


class PrincipalConfig(_Strict):
    """How a client certificate becomes a principal (``User:<name>``)."""

    source: Literal["subject", "san_dns", "san_uri", "san_email"] = "subject"
    rules: list[str] = Field(default_factory=lambda: ["DEFAULT"], min_length=1)

    @field_validator("rules")
    @classmethod
    def _check_rules(cls, rules: list[str]) -> list[str]:
        try:
            parse_rules(rules)
        except RuleError as exc:
            raise ValueError(str(exc)) from None
        return rules


class ListenerTlsConfig(_Strict):
    """TLS on a client listener (server side), optionally with client certificates."""

    cert_file: Path
    key_file: Path
    key_password_file: Path | None = None
    min_version: TlsVersion = "TLSv1.2"
    ciphers: str = Field(default=DEFAULT_CIPHERS, min_length=1)
    tls13_ciphersuites: list[str] | None = Field(
        default=None, examples=[["TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"]]
    )
    handshake_timeout_s: float = Field(default=10.0, gt=0)
    client_auth: Literal["none", "requested", "required"] = "none"
    client_cas: list[ClientCaConfig] = Field(default_factory=list)
    principal: PrincipalConfig = PrincipalConfig()
    watch_interval_s: float = Field(default=5.0, ge=0)

    @field_validator("tls13_ciphersuites")
    @classmethod
    def _check_suites(cls, suites: list[str] | None) -> list[str] | None:
        return None if suites is None else check_names(suites)

    @model_validator(mode="after")
    def _check_client_auth(self) -> ListenerTlsConfig:
        if self.client_auth != "none" and not self.client_cas:
            raise ValueError(
                f"client_auth {self.client_auth!r} needs at least one client_cas entry"
            )
        with_crl = [ca.crl_file is not None for ca in self.client_cas]
        if any(with_crl) and not all(with_crl):
            raise ValueError(
                "client_cas: give a crl_file for every CA or for none"
                " (revocation is checked for all client certificates or for none)"
            )
        return self

    def files(self) -> list[Path]:
        paths = [self.cert_file, self.key_file]
        if self.key_password_file is not None:
            paths.append(self.key_password_file)
        for ca in self.client_cas:
            paths.append(ca.ca_file)
            if ca.crl_file is not None:
                paths.append(ca.crl_file)
        return paths


class UpstreamTlsConfig(_Strict):
    """TLS from the gateway to the brokers, with the gateway's own client certificate."""

    ca_files: list[Path] = Field(default_factory=list)
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password_file: Path | None = None
    check_hostname: bool = True
    min_version: TlsVersion = "TLSv1.2"
    ciphers: str = Field(default=DEFAULT_CIPHERS, min_length=1)
    watch_interval_s: float = Field(default=5.0, ge=0)

    @model_validator(mode="after")
    def _check_pair(self) -> UpstreamTlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        return self

    def files(self) -> list[Path]:
        optional = [self.cert_file, self.key_file, self.key_password_file]
        return [*self.ca_files, *(p for p in optional if p is not None)]


_TEMPLATE = re.compile(r"^([A-Za-z0-9.-]*)\{node_id\}([A-Za-z0-9.-]*)$")


class SniConfig(_Strict):
    """One TLS port for the whole cluster: the broker is chosen by the SNI host name."""

    broker_host: str = Field(examples=["b{node_id}.kafka.example.com"])

    @field_validator("broker_host")
    @classmethod
    def _check_template(cls, value: str) -> str:
        found = _TEMPLATE.match(value)
        if found is None or "." not in value:
            raise ValueError(
                "expected a host name with {node_id} once, e.g. 'b{node_id}.kafka.example.com'"
            )
        return value.lower()

    def host(self, node_id: int) -> str:
        return self.broker_host.replace("{node_id}", str(node_id))

    def node_id(self, server_name: str) -> int | None:
        """The node id a server name stands for, or None when it is no broker name."""
        found = _TEMPLATE.match(self.broker_host)
        assert found is not None
        prefix, suffix = found.groups()
        pattern = f"{re.escape(prefix)}(0|[1-9][0-9]{{0,4}}){re.escape(suffix)}"
        matched = re.fullmatch(pattern, server_name.lower().rstrip("."))
        return int(matched.group(1)) if matched else None
