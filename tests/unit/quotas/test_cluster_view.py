"""The cluster topic view used by licence checks: failures and recent creations."""

from __future__ import annotations

import socket

import pytest

from gateway.quotas.cluster_view import ClusterTopics, ClusterUnavailable
from gateway.upstream.client import BrokerClient


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


async def test_no_broker_answering_is_a_clear_error() -> None:
    port = closed_port()
    view = ClusterTopics(BrokerClient([("127.0.0.1", port)], timeout_s=1.0))
    with pytest.raises(ClusterUnavailable) as failure:
        await view.fetch()
    assert f"127.0.0.1:{port}" in str(failure.value)
    assert view.fetched_at is None


def test_recent_creations_count_until_the_brokers_report_them() -> None:
    view = ClusterTopics(BrokerClient([]))
    view.note("acme.new", 4)
    view.note("acme.grown", 6)
    seen = view._with_recent({"acme.grown": 3, "acme.old": 2})
    assert seen == {"acme.grown": 6, "acme.old": 2, "acme.new": 4}
    assert view._with_recent({"acme.grown": 8, "acme.new": 4}) == {"acme.grown": 8, "acme.new": 4}
