"""Listeners: one configured listener's bootstrap port and a port per known broker."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..addresses.sni import SniPublicMap
from ..addresses.topology import PublicMap
from ..config import ListenerConfig
from ..tls.accept import TlsAcceptor
from ..tls.material import Material
from .client import ClientConnection
from .revoked_certs import close_revoked_certificates

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("kgw.server")


class ListenerSet:
    """One configured listener: its bootstrap port and a port per known broker."""

    def __init__(self, gateway: Gateway, config: ListenerConfig) -> None:
        self.gateway = gateway
        self.config = config
        self.public = (
            PublicMap(config, gateway.topology)
            if config.sni is None
            else SniPublicMap(config, gateway.topology, config.sni)
        )
        self.tls = (  # loads the TLS material: MaterialError stops the start
            TlsAcceptor(config.name, config.tls, config.sni, config.advertised_host)
            if config.tls is not None
            else None
        )
        if self.tls is not None and self.tls.config.client_auth != "none":
            self.tls.material.on_reload.append(self._tls_reloaded)
        self.servers: dict[int | None, asyncio.Server] = {}
        self._opening: set[int] = set()

    def _tls_reloaded(self, material: Material) -> None:
        """New CRLs (or CAs): established connections of revoked certificates close."""
        close_revoked_certificates(self.gateway, self, material)

    def bind_port(self, node_id: int | None) -> int:
        if node_id is None or self.config.broker_port_base is None:
            return self.config.bootstrap_port
        return self.config.broker_port_base + node_id

    def _protocol(self, node_id: int | None) -> asyncio.Protocol:
        conn = ClientConnection(self.gateway, self, node_id)
        return conn if self.tls is None else self.tls.protocol(conn)

    async def open(self, node_id: int | None) -> None:
        port = self.bind_port(node_id)
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(
                lambda: self._protocol(node_id),
                self.config.bind_host,
                port,
                reuse_address=True,
                reuse_port=self.gateway.reuse_port or None,  # workers share the ports
                backlog=1024,
            )
        except OSError as exc:
            log.error(
                "cannot listen: %s",
                exc.strerror,
                extra={"event": "listen_failed", "listener": self.config.name, "port": port},
            )
            if node_id is None:
                raise
            return
        finally:
            if node_id is not None:
                self._opening.discard(node_id)
        self.servers[node_id] = server
        log.info(
            "listening",
            extra={
                "event": "listening",
                "listener": self.config.name,
                "host": self.config.bind_host,
                "port": port,
                "node_id": node_id,
            },
        )

    def ensure_broker(self, node_id: int) -> None:
        if node_id in self.servers or node_id in self._opening or self.config.sni is not None:
            return
        if node_id > self.config.max_node_id:
            log.error(
                "broker node id has no public port",
                extra={
                    "event": "unmappable_broker",
                    "listener": self.config.name,
                    "node_id": node_id,
                },
            )
            return
        self._opening.add(node_id)
        self.gateway.spawn(f"listen-{self.config.name}-{node_id}", self.open(node_id))

    def close(self) -> None:
        for server in self.servers.values():
            server.close()
