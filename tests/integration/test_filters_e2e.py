"""An operator's filter end to end: examples/topic_guard.py loaded by a real gateway
(``filters:`` in its configuration, by module path), the real 3-node cluster behind it,
and confluent-kafka (librdkafka), unmodified, in front.

A good name is created and visible through the gateway; a bad name is answered with
INVALID_TOPIC_EXCEPTION and the guard's message at the client and never reaches the
brokers (checked on the brokers themselves); records still flow both ways with the
filter loaded; and a filter that cannot be built stops ``kgw serve`` at start-up with a
message naming its ``filters[i]`` entry.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster

from ..conftest import GatewayFactory, gateway_log_events

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[2]  # where ``examples`` is a package
PATTERN = "e2e[.][a-z0-9-]+"
MESSAGE = "topic names are e2e.<name>, in lower case"
GUARD = {
    "module": "examples.topic_guard:TopicNameGuard",
    "config": {"pattern": PATTERN, "message": MESSAGE},
}


@contextmanager
def examples_importable() -> Iterator[None]:
    """The gateway child inherits this environment: put the repository on its path."""
    with pytest.MonkeyPatch.context() as patch:
        path = os.environ.get("PYTHONPATH")
        patch.setenv("PYTHONPATH", str(REPO) if not path else f"{REPO}{os.pathsep}{path}")
        yield


@pytest.fixture(scope="module")
def guarded(gateway_factory: GatewayFactory) -> GatewayProcess:
    with examples_importable():
        return gateway_factory(filters=[GUARD])


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, *names: str) -> dict[str, KafkaError | None]:
    """Create ``names`` in one CreateTopics request; each name's error (None: created)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=3, replication_factor=3) for n in names]
    )
    outcome: dict[str, KafkaError | None] = {}
    for name, future in futures.items():
        try:
            future.result(30)
            outcome[name] = None
        except KafkaException as exc:
            outcome[name] = exc.args[0]
    return outcome


def topics_at(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics)


def eventually_listed(bootstrap: str, name: str, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if name in topics_at(bootstrap):
            return True
        time.sleep(0.3)
    return False


def test_a_good_name_is_created(guarded: GatewayProcess, kafka_cluster: KafkaCluster) -> None:
    name = unique("e2e.orders-")
    assert create(guarded.bootstrap, name) == {name: None}
    assert eventually_listed(guarded.bootstrap, name)  # Metadata through the gateway
    assert name in topics_at(kafka_cluster.bootstrap_servers)  # and on the brokers


def refused_with_the_guards_message(error: KafkaError | None, *names: str) -> None:
    assert error is not None
    assert error.code() == KafkaError.TOPIC_EXCEPTION == 17, error
    text = error.str()
    assert MESSAGE in text, text
    for name in names:
        assert repr(name) in text, text


def test_a_bad_name_is_refused_and_never_reaches_the_brokers(
    guarded: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    bad = unique("E2E.Orders-")
    before = len(gateway_log_events(guarded, "topic_name_refused"))
    outcome = create(guarded.bootstrap, bad)
    refused_with_the_guards_message(outcome[bad], bad)
    logged = gateway_log_events(guarded, "topic_name_refused")[before:]
    assert [(r["logger"], r["principal"], r["count"]) for r in logged] == [
        ("kgw.filters.topic-name-guard", "User:ANONYMOUS", 1)
    ]
    time.sleep(1)  # were it created, the controller would have it by now
    assert bad not in topics_at(kafka_cluster.bootstrap_servers)
    assert bad not in topics_at(guarded.bootstrap)


def test_a_request_with_one_bad_name_is_refused_whole(
    guarded: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    """The guard's documented semantics: the broker never sees the request, so the good
    name of the same request is not created either, and both carry the reason."""
    good, bad = unique("e2e.good-"), unique("scratch-")
    outcome = create(guarded.bootstrap, good, bad)
    refused_with_the_guards_message(outcome[good], bad)
    refused_with_the_guards_message(outcome[bad], bad)
    time.sleep(1)
    assert not {good, bad} & topics_at(kafka_cluster.bootstrap_servers)


def test_records_flow_both_ways_with_the_filter_loaded(guarded: GatewayProcess) -> None:
    name = unique("e2e.records-")
    assert create(guarded.bootstrap, name) == {name: None}
    producer = Producer(
        {"bootstrap.servers": guarded.bootstrap, "acks": "all", "message.timeout.ms": 30000}
    )
    errors: list[KafkaError | None] = []
    sent = [f"value-{i}".encode() for i in range(200)]
    for value in sent:
        producer.produce(name, value=value, on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None] * len(sent)

    consumer = Consumer({
        "bootstrap.servers": guarded.bootstrap, "group.id": unique("e2e.readers-"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([name])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(received) == sorted(sent)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"module": "examples.no_such_guard:Guard"}, "cannot import examples.no_such_guard"),
        (
            {**GUARD, "config": {"pattern": "e2e[.("}},
            "examples.topic_guard:TopicNameGuard refused its config: pattern 'e2e[.(' is not"
            " a valid regular expression",
        ),
    ],
    ids=["not-importable", "bad-pattern"],
)
def test_a_filter_that_cannot_be_built_stops_start_up(
    entry: dict[str, Any],
    reason: str,
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
) -> None:
    bootstrap_port, base = pick_ports()
    config = dev_config(kafka_cluster.bootstrap_servers, bootstrap_port, base)
    config["filters"] = [GUARD, entry]
    gateway = GatewayProcess(tmp_path, config)
    try:
        with examples_importable(), pytest.raises(RuntimeError, match="gateway exited"):
            gateway.start(expected_brokers=None, timeout=30)  # listening: it started anyway
    finally:
        gateway.stop()
    assert gateway.proc is not None and gateway.proc.returncode not in (0, None)
    log = gateway.log_path.read_text(errors="replace")
    assert f"filters[1]: {reason}" in log, log
    assert "Traceback" not in log, log  # a clean start-up error, not a crash
