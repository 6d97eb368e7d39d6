"""Where the brokers are (privately) and where clients see them (publicly).

``Topology`` is the gateway-wide map of node id → private address, learned
from every address-bearing response and from the gateway's own metadata
refresh. ``PublicMap`` is one listener's view: node ``N`` is advertised as the
listener's public host and ``port_base + N``. Neither does any I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..config import ListenerConfig

log = logging.getLogger("kgw.topology")


class UnmappableBroker(Exception):
    """A broker's node id has no public port on a listener (gateway configuration)."""


class Topology:
    """Node id → private ``(host, port)``. ``on_new_broker`` is called for a broker first
    seen in the gateway's own metadata refresh (``replace_all``); one first seen in a
    client's response is returned by ``learn``, and that connection's core asks for its
    listener (``core.commands.OpenListener``), so no response rewrite opens a socket."""

    def __init__(self, on_new_broker: Callable[[int], None] | None = None) -> None:
        self._brokers: dict[int, tuple[str, int]] = {}
        self._on_new_broker = on_new_broker

    def learn(self, node_id: int, host: str, port: int) -> bool:
        """Note a broker's private address; ``True`` when the broker is new."""
        if node_id < 0 or not host or port <= 0:
            return False
        known = self._brokers.get(node_id)
        if known == (host, port):
            return False
        self._brokers[node_id] = (host, port)
        if known is None:
            log.info("broker discovered", extra={"event": "broker_discovered", "node_id": node_id})
            return True
        log.info("broker moved", extra={"event": "broker_moved", "node_id": node_id})
        return False

    def replace_all(self, brokers: dict[int, tuple[str, int]]) -> list[int]:
        """Adopt a full broker list (from the gateway's own metadata); returns departed ids."""
        for node_id, (host, port) in brokers.items():
            if self.learn(node_id, host, port) and self._on_new_broker is not None:
                self._on_new_broker(node_id)
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

    def learn(self, node_id: int, host: str, port: int) -> bool:
        return self.topology.learn(node_id, host, port)


class AddressMap(Protocol):
    """What a response rewrite needs: learn a private address, give the public one."""

    def learn(self, node_id: int, host: str, port: int) -> bool: ...

    def public(self, node_id: int) -> tuple[str, int]: ...


class ConnectionMap:
    """One connection's view of its listener's ``PublicMap``: it notes the brokers that
    its responses reveal first, for the connection core to ask listeners for."""

    __slots__ = ("discovered", "mapping")

    def __init__(self, mapping: PublicMap) -> None:
        self.mapping = mapping
        self.discovered: list[int] = []

    def public(self, node_id: int) -> tuple[str, int]:
        return self.mapping.public(node_id)

    def learn(self, node_id: int, host: str, port: int) -> bool:
        new = self.mapping.learn(node_id, host, port)
        if new:
            self.discovered.append(node_id)
        return new
