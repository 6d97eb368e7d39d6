"""Where the brokers are (privately) and where clients see them (publicly).

``Topology`` is the gateway-wide map of node id → private address, learned
from every address-bearing response and from the gateway's own metadata
refresh. ``PublicMap`` is one listener's view: node ``N`` is advertised as the
listener's public host and ``port_base + N``. Neither does any I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..config import ListenerConfig

log = logging.getLogger("kgw.topology")


class UnmappableBroker(Exception):
    """A broker's node id has no public port on a listener (gateway configuration)."""


class Topology:
    """Node id → private ``(host, port)``, with a callback when a broker first appears."""

    def __init__(self, on_new_broker: Callable[[int], None] | None = None) -> None:
        self._brokers: dict[int, tuple[str, int]] = {}
        self._on_new_broker = on_new_broker

    def learn(self, node_id: int, host: str, port: int) -> None:
        if node_id < 0 or not host or port <= 0:
            return
        known = self._brokers.get(node_id)
        if known == (host, port):
            return
        self._brokers[node_id] = (host, port)
        if known is None:
            log.info("broker discovered", extra={"event": "broker_discovered", "node_id": node_id})
            if self._on_new_broker is not None:
                self._on_new_broker(node_id)
        else:
            log.info("broker moved", extra={"event": "broker_moved", "node_id": node_id})

    def replace_all(self, brokers: dict[int, tuple[str, int]]) -> list[int]:
        """Adopt a full broker list (from the gateway's own metadata); returns departed ids."""
        for node_id, (host, port) in brokers.items():
            self.learn(node_id, host, port)
        departed = [n for n in self._brokers if n not in brokers]
        for node_id in departed:
            del self._brokers[node_id]
            log.info("broker departed", extra={"event": "broker_departed", "node_id": node_id})
        return departed

    def address(self, node_id: int) -> tuple[str, int] | None:
        return self._brokers.get(node_id)

    def node_ids(self) -> list[int]:
        return sorted(self._brokers)


class PublicMap:
    """One listener's public addresses, plus learning into the shared topology."""

    __slots__ = ("_base", "_host", "_max_node_id", "listener", "topology")

    def __init__(self, listener: ListenerConfig, topology: Topology) -> None:
        self.listener = listener
        self.topology = topology
        self._host = listener.advertised_host
        self._base = listener.public_port_base
        self._max_node_id = listener.max_node_id

    def public(self, node_id: int) -> tuple[str, int]:
        if not 0 <= node_id <= self._max_node_id:
            raise UnmappableBroker(
                f"broker node id {node_id} exceeds listeners[{self.listener.name}].max_node_id"
                f" ({self._max_node_id}); raise it so every broker gets a public port"
            )
        return self._host, self._base + node_id

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.topology.learn(node_id, host, port)
