"""The loopback checks of the test suite find what they look for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.loopback import EXPECTED_WILDCARD, bound_addresses, exposed_listeners

LISTENER = """
import socket, sys
sys.stdin.readline()  # listens only once the test has told the suite's watcher
s = socket.socket()
s.bind(("0.0.0.0", 0))
s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


def test_a_wildcard_listener_below_this_process_is_found_and_loopback_is_not() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    EXPECTED_WILDCARD.add(child.pid)
    child.stdin.write("go\n")
    child.stdin.flush()
    with socket.socket() as local:
        local.bind(("127.0.0.1", 0))
        local.listen()
        try:
            port = int(child.stdout.readline())
            found = exposed_listeners(os.getpid())
            assert any(f"[{child.pid}] 0.0.0.0:{port}" in line for line in found), found
            assert not any(f":{local.getsockname()[1]}" in line for line in found)
            ignoring = exposed_listeners(os.getpid(), ignore={child.pid})
            assert not any(f"[{child.pid}]" in line for line in ignoring)
            assert [str(a) for a in bound_addresses(port=port)] == ["0.0.0.0"]
            assert [str(a) for a in bound_addresses(port=local.getsockname()[1])] == ["127.0.0.1"]
            assert [str(a) for a in bound_addresses(pid=child.pid)] == ["0.0.0.0"]
        finally:
            child.stdin.close()
            child.wait(timeout=10)
    assert not any(f"[{child.pid}]" in line for line in exposed_listeners(os.getpid()))
