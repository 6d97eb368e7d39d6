"""Session-wide real components: a 3-node KRaft cluster and a gateway in front of it.

Nothing here skips: when Java, Maven or a port is missing the fixture raises
and every test that needs it fails. A watcher fails the run when any process the
tests start listens on an address beyond loopback.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from tests import tiers
from tests.loopback import EXPECTED_WILDCARD, exposed_listeners
from tests.redis_server import RedisServer

WATCH_INTERVAL_S = 2.0


class LoopbackWatch:
    """Looks every two seconds for listening sockets beyond loopback among the processes
    below this one (the tests' servers, clusters, KDCs, JVMs)."""

    def __init__(self) -> None:
        self.found: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loopback-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join()
        self.found |= exposed_listeners(os.getpid(), EXPECTED_WILDCARD)
        return self.found

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            self.found |= exposed_listeners(os.getpid(), EXPECTED_WILDCARD)


_watch = LoopbackWatch()


def pytest_sessionstart(session: pytest.Session) -> None:
    _watch.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    exposed = _watch.stop()
    if exposed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "processes of the tests listened beyond loopback", red=True)
            for line in sorted(exposed):
                reporter.write_line(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(tryfirst=True)  # before -m selects by tier
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test gets its tier markers (tests/tiers.py): ``pure`` or the components it starts."""
    tiers.classify(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """A pure test runs under the guard, from the set-up of its fixtures (of any scope)."""
    if not tiers.is_pure(item):
        return (yield)
    with tiers.PureGuard(item.nodeid) as guard:
        item.stash[tiers.GUARD] = guard
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """A pure test that started a component or left a child running fails here."""
    guard = item.stash.get(tiers.GUARD, None)
    if guard is not None:
        guard.refusing = False
    result = yield
    if guard is not None:
        guard.check()
    return result


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"), nodes=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


GatewayFactory = Callable[..., GatewayProcess]


@pytest.fixture(scope="session")
def gateway_factory(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayFactory]:
    """Extra gateways on the shared cluster: ``gateway_factory(limits={...})``.

    ``wait_ready=False`` only waits until the bootstrap port listens.
    """
    started: list[GatewayProcess] = []

    def start(wait_ready: bool = True, **overrides: Any) -> GatewayProcess:
        bootstrap_port, base = pick_ports()
        config = dev_config(kafka_cluster.bootstrap_servers, bootstrap_port, base, **overrides)
        gateway = GatewayProcess(tmp_path_factory.mktemp("gateway"), config)
        gateway.start(expected_brokers=len(kafka_cluster.pids) if wait_ready else None)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own on a free loopback port (killed at the end);
    tests may ``kill()`` and ``start()`` it (an outage, a restart)."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def gateway(gateway_factory: GatewayFactory) -> GatewayProcess:
    """The shared gateway, configured like the dev stack."""
    return gateway_factory()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A fresh topic name for this test (created by the test itself)."""
    return f"t-{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"


def sasl_listener(name: str = "tenants") -> dict[str, Any]:
    """A SASL listener on fresh loopback ports, for ``gateway_factory(listeners=[...])``."""
    bootstrap, base = pick_ports()
    return {
        "name": name, "bind_host": "127.0.0.1", "bootstrap_port": bootstrap,
        "broker_port_base": base, "advertised_host": "127.0.0.1", "max_node_id": 16,
        "authentication": "sasl",
    }  # fmt: skip


def gateway_log_events(gateway: GatewayProcess, event: str) -> list[dict[str, Any]]:
    """The gateway's structured log records with this ``event``."""
    records = []
    for line in gateway.log_records():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == event:
            records.append(record)
    return records


def direct_addresses(cluster: KafkaCluster) -> set[str]:
    return {f"{h}:{p}" for h, p in cluster.brokers.values()}


def assert_only_gateway_addresses(
    seen: set[str], gateway: GatewayProcess, cluster: KafkaCluster
) -> None:
    assert seen, "no broker addresses were observed"
    assert not seen & direct_addresses(cluster), f"private broker addresses leaked: {seen}"
    host = gateway.listener["advertised_host"]
    base = int(gateway.listener["broker_port_base"])
    for address in seen:
        h, p = address.rsplit(":", 1)
        assert h == host and base <= int(p) <= base + 16, address
