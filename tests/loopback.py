"""Keeping test servers on loopback, and checking that they are.

``bound_addresses`` reads the kernel's socket tables (``/proc/net/{tcp,tcp6,udp,udp6}``):
the addresses of the listening TCP sockets and bound UDP sockets of a process, or on
a port. ``KDC_ON_LOOPBACK`` is the ``kdc_conf`` for k5test's ``K5Realm``: its default
``kdc_listen`` names only a port, and MIT's krb5kdc then listens on every address.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Collection, Iterator
from pathlib import Path

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

KDC_ON_LOOPBACK = {
    "realms": {"$realm": {"kdc_listen": "127.0.0.1:$port0", "kdc_tcp_listen": "127.0.0.1:$port0"}}
}

TCP_LISTEN = "0A"  # the state column of /proc/net/tcp*
# Processes the tests start on purpose with a wildcard listener (tests/unit/test_loopback.py),
# which the suite's watcher (tests/conftest.py) leaves alone.
EXPECTED_WILDCARD: set[int] = set()


def _address(hex_address: str) -> Address:
    raw = bytes.fromhex(hex_address)
    # The tables print each 32-bit word of an address in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return ipaddress.IPv4Address(words)
    v6 = ipaddress.IPv6Address(words)
    return v6.ipv4_mapped or v6


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _bound(tables: tuple[str, ...]) -> Iterator[tuple[Address, int, str]]:
    """(address, port, socket inode) of every listening TCP / bound UDP socket."""
    for table in tables:
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            host, _, port = fields[1].partition(":")
            if table.startswith("tcp") and fields[3] != TCP_LISTEN:
                continue
            yield _address(host), int(port, 16), fields[9]


def bound_addresses(*, pid: int | None = None, port: int | None = None) -> list[Address]:
    """Addresses of listening TCP and bound UDP sockets, of process ``pid`` and/or on
    ``port`` (one of them is required)."""
    if pid is None and port is None:
        raise ValueError("bound_addresses needs a pid or a port")
    inodes = socket_inodes(pid) if pid is not None else None
    return [
        address
        for address, local_port, inode in _bound(("tcp", "tcp6", "udp", "udp6"))
        if (inodes is None or inode in inodes) and (port is None or local_port == port)
    ]


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(root: int) -> set[int]:
    """``root`` and every process below it."""
    children = _children()
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def exposed_listeners(root: int, ignore: Collection[int] = ()) -> set[str]:
    """Listening TCP sockets beyond loopback of ``root`` or a process below it (but not
    the processes in ``ignore``), as ``"command[pid] address:port"``."""
    owners: dict[str, str] = {}
    for pid in descendants(root) - set(ignore):
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
            for inode in socket_inodes(pid):
                owners[inode] = f"{command}[{pid}]"
        except OSError:
            continue  # gone meanwhile
    return {
        f"{owners[inode]} {address}:{port}"
        for address, port, inode in _bound(("tcp", "tcp6"))
        if inode in owners and not address.is_loopback
    }
