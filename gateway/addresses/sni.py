"""SNI mode: one TLS port for the whole cluster, brokers told apart by host name.

Broker ``N`` is advertised as ``sni.broker_host`` with ``{node_id}`` = N, on the
listener's public bootstrap port; the TLS acceptor routes a connection by the
server name the client sent (``TlsAcceptor.route``). No I/O.
"""

from __future__ import annotations

from ..config import ListenerConfig
from ..tls.settings import SniConfig
from .topology import PublicMap, Topology


class SniPublicMap(PublicMap):
    """A listener's public addresses when every broker shares one port."""

    __slots__ = ("_port", "_sni")

    def __init__(self, listener: ListenerConfig, topology: Topology, sni: SniConfig) -> None:
        super().__init__(listener, topology)
        self._sni = sni
        self._port = listener.public_bootstrap_port

    def public(self, node_id: int) -> tuple[str, int]:
        super().public(node_id)  # the max_node_id check
        return self._sni.host(node_id), self._port
