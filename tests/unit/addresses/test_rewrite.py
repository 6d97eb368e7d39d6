"""Address rewriting, and a check against kio that no broker address escapes."""

from __future__ import annotations

import dataclasses
import datetime
import typing

from kio.schema.describe_cluster.v1.response import DescribeClusterBroker, DescribeClusterResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as FindCoordinatorV3
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from gateway.addresses.rewrite import REWRITERS, needs_rewrite, rewrite
from gateway.addresses.topology import PublicMap
from gateway.protocol import apis

# Responses holding a host that is not a broker address, reviewed one by one.
NOT_BROKER_ADDRESSES = {
    29: "DescribeAcls: the host of an ACL entry (a client address pattern)",
    31: "DeleteAcls: the host of an ACL entry",
    88: "StreamsGroupHeartbeat: Kafka Streams application endpoints",
    89: "StreamsGroupDescribe: Kafka Streams application endpoints",
}


def _has_host(cls: type, seen: set[type]) -> bool:
    names = {f.name for f in dataclasses.fields(cls)}
    if "host" in names:
        return True
    for hint in typing.get_type_hints(cls).values():
        for arg in (hint, *typing.get_args(hint)):
            for inner in (arg, *typing.get_args(arg)):
                if (
                    isinstance(inner, type)
                    and dataclasses.is_dataclass(inner)
                    and inner not in seen
                ):
                    seen.add(inner)
                    if _has_host(inner, seen):
                        return True
    return False


def test_every_advertised_response_with_a_host_is_rewritten() -> None:
    missing = []
    for key, spec in apis.gateway_apis().items():
        for version in range(spec.min_version, spec.max_version + 1):
            if _has_host(apis.response_schema(key, version), set()):
                if key in NOT_BROKER_ADDRESSES:
                    continue
                if not needs_rewrite(key, version):
                    missing.append((spec.name, version))
    assert missing == []
    assert set(REWRITERS) >= {0, 1, 3, 10, 60, 78, 79}


def test_find_coordinator_old_fields(mapping: PublicMap) -> None:
    response = FindCoordinatorV3(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        node_id=BrokerId(2),
        host="10.0.0.2",
        port=i32(9092),
    )
    out = rewrite(10, response, mapping)
    assert (out.host, out.port) == ("kafka.example.com", 19102)


def test_find_coordinator_error_left_alone(mapping: PublicMap) -> None:
    response = FindCoordinatorV3(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.coordinator_not_available,
        error_message=None,
        node_id=BrokerId(-1),
        host="",
        port=i32(-1),
    )
    assert rewrite(10, response, mapping) == response


def test_find_coordinator_v4_list(mapping: PublicMap) -> None:
    coordinator = Coordinator(
        key="g",
        node_id=BrokerId(3),
        host="10.0.0.3",
        port=i32(9092),
        error_code=ErrorCode.none,
        error_message=None,
    )
    response = FindCoordinatorResponse(
        throttle_time=datetime.timedelta(0), coordinators=(coordinator,)
    )
    out = rewrite(10, response, mapping)
    assert [(c.host, c.port) for c in out.coordinators] == [("kafka.example.com", 19103)]


def test_describe_cluster_brokers(mapping: PublicMap) -> None:
    broker = DescribeClusterBroker(broker_id=BrokerId(1), host="10.0.0.1", port=i32(9092))
    response = DescribeClusterResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        cluster_id="x",
        controller_id=BrokerId(1),
        brokers=(broker,),
    )
    out = rewrite(60, response, mapping)
    assert [(b.host, b.port) for b in out.brokers] == [("kafka.example.com", 19101)]
    assert mapping.topology.address(1) == ("10.0.0.1", 9092)
