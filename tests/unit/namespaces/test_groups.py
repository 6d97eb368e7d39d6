"""Classic consumer groups' embedded protocol (JoinGroup subscriptions, SyncGroup
assignments, DescribeGroups) in cluster-side names on the brokers, the tenant's on its
side; other protocols' bytes untouched."""

from __future__ import annotations

import dataclasses
import io
import struct
from typing import Any

import pytest
from kio.schema.consumer_protocol_assignment.v3 import data as asg
from kio.schema.consumer_protocol_subscription.v3 import data as sub
from kio.schema.describe_groups.v5 import response as dg
from kio.schema.join_group.v5 import request as jreq
from kio.schema.join_group.v5 import response as jres
from kio.schema.sync_group.v3 import request as sreq
from kio.schema.sync_group.v3 import response as sres
from kio.schema.types import GroupId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from gateway.filters.chain import Rejected
from gateway.namespaces.groups import map_assignment, map_subscription
from gateway.namespaces.names import NameRefused, Namespace

from .samples import sample
from .test_filter import bound

NS = Namespace("acme", "acme.")


def blob(entity: Any, version: int = 3, rest: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue() + rest


def subscription(*topics: str, owned: tuple[str, ...] = ()) -> Any:
    return sub.ConsumerProtocolSubscription(
        topics=topics, user_data=b"ud",
        owned_partitions=tuple(sub.TopicPartition(topic=TopicName(t), partitions=(i32(0),))
                               for t in owned),
        generation_id=i32(4), rack_id="r1",
    )  # fmt: skip


def assignment(*topics: str) -> Any:
    return asg.ConsumerProtocolAssignment(
        assigned_partitions=tuple(asg.TopicPartition(topic=TopicName(t), partitions=(i32(1),))
                                  for t in topics),
        user_data=None,
    )  # fmt: skip


def read(kind: Any, data: bytes) -> Any:
    return entity_reader(kind)(data, 2)[0]


def test_subscription_both_ways() -> None:
    out = map_subscription(blob(subscription("orders", "x", owned=("orders",))), NS.to_cluster)
    decoded = read(sub.ConsumerProtocolSubscription, out)
    assert decoded.topics == ("acme.orders", "acme.x")
    assert [p.topic for p in decoded.owned_partitions] == ["acme.orders"]
    assert decoded.user_data == b"ud" and decoded.rack_id == "r1" and decoded.generation_id == 4
    back = map_subscription(blob(subscription("acme.orders", "other.y", owned=("other.y",))),
                            NS.to_tenant)  # fmt: skip
    decoded = read(sub.ConsumerProtocolSubscription, back)
    assert decoded.topics == ("orders",) and decoded.owned_partitions == ()


def test_old_and_newer_versions() -> None:
    from kio.schema.consumer_protocol_subscription.v0 import data as sub0

    v0 = sub0.ConsumerProtocolSubscription(topics=("orders",), user_data=None)
    out = map_subscription(blob(v0, 0), NS.to_cluster)
    assert out[:2] == b"\x00\x00"
    assert entity_reader(sub0.ConsumerProtocolSubscription)(out, 2)[0].topics == ("acme.orders",)
    # a version newer than known: read as the newest, the rest kept (Kafka does the same)
    newer = map_assignment(blob(assignment("orders"), 7, rest=b"\x01\x02"), NS.to_cluster)
    assert newer[:2] == b"\x00\x07" and newer.endswith(b"\x01\x02")
    assert [p.topic for p in read(asg.ConsumerProtocolAssignment, newer).assigned_partitions] == [
        "acme.orders"
    ]
    assert map_assignment(b"", NS.to_cluster) == b""


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\xff\xff", b"\x00\x03\x00\x00\x00\x09ab",
                                 blob(subscription("a"), 3, rest=b"zz")])  # fmt: skip
def test_unreadable_subscriptions_are_refused(bad: bytes) -> None:
    with pytest.raises(NameRefused):
        map_subscription(bad, NS.to_cluster)


def join(protocol_type: str, metadata: bytes) -> Any:
    return jreq.JoinGroupRequest(
        group_id=GroupId("g"), session_timeout=sample(jreq.JoinGroupRequest, "x").session_timeout,
        rebalance_timeout=sample(jreq.JoinGroupRequest, "x").rebalance_timeout, member_id="m",
        group_instance_id=None, protocol_type=protocol_type,
        protocols=(jreq.JoinGroupRequestProtocol(name="range", metadata=metadata),),
    )  # fmt: skip


def test_filter_maps_a_consumer_groups_join_and_sync_of_old_versions() -> None:
    chain = bound("acme")
    forwarded = chain.request(11, 5, 1, lambda: join("consumer", blob(subscription("orders"))))
    assert forwarded.group_id == "acme.g"
    meta = forwarded.protocols[0].metadata
    assert read(sub.ConsumerProtocolSubscription, meta).topics == ("acme.orders",)
    answer = sample(jres.JoinGroupResponse, "x")
    member = jres.JoinGroupResponseMember(
        member_id="m", group_instance_id=None, metadata=blob(subscription("acme.orders", "b.x"))
    )
    back = chain.response(11, 5, 1, answer.__class__(**{**_fields(answer), "members": (member,)}))
    assert read(sub.ConsumerProtocolSubscription, back.members[0].metadata).topics == ("orders",)
    # SyncGroup v3 names no protocol type: the JoinGroup on this connection said "consumer"
    sync = sreq.SyncGroupRequest(
        group_id=GroupId("g"), generation_id=i32(1), member_id="m", group_instance_id=None,
        assignments=(sreq.SyncGroupRequestAssignment(member_id="m",
                                                      assignment=blob(assignment("orders"))),),
    )  # fmt: skip
    sent = chain.request(14, 3, 2, lambda: sync)
    sent_topics = read(asg.ConsumerProtocolAssignment, sent.assignments[0].assignment)
    assert [p.topic for p in sent_topics.assigned_partitions] == ["acme.orders"]
    reply = sres.SyncGroupResponse(
        throttle_time=sample(sres.SyncGroupResponse, "x").throttle_time,
        error_code=sample(sres.SyncGroupResponse, "x").error_code,
        assignment=blob(assignment("acme.orders", "b.secret")),
    )
    got = read(asg.ConsumerProtocolAssignment, chain.response(14, 3, 2, reply).assignment)
    assert [p.topic for p in got.assigned_partitions] == ["orders"]


def test_other_protocols_bytes_are_untouched() -> None:
    chain = bound("acme")
    opaque = b"\x00\x01connect-bytes"
    forwarded = chain.request(11, 5, 1, lambda: join("connect", opaque))
    assert forwarded.protocols[0].metadata == opaque
    sync = sreq.SyncGroupRequest(
        group_id=GroupId("g"), generation_id=i32(1), member_id="m", group_instance_id=None,
        assignments=(sreq.SyncGroupRequestAssignment(member_id="m", assignment=opaque),),
    )  # fmt: skip
    assert chain.request(14, 3, 2, lambda: sync).assignments[0].assignment == opaque


def test_unreadable_consumer_subscription_is_refused() -> None:
    outcome = bound("acme").request(11, 5, 1, lambda: join("consumer", b"\x00\x03junk"))
    assert isinstance(outcome, Rejected) and int(outcome.code) == 42  # INVALID_REQUEST


def test_describe_groups_shows_tenant_names() -> None:
    answer = sample(dg.DescribeGroupsResponse, "x")
    group = answer.groups[0]
    member = group.members[0].__class__(**{
        **_fields(group.members[0]),
        "member_metadata": blob(subscription("acme.orders")),
        "member_assignment": blob(assignment("acme.orders", "other.x")),
    })  # fmt: skip
    consumer = group.__class__(**{**_fields(group), "group_id": "acme.g",
                                  "protocol_type": "consumer", "members": (member,)})  # fmt: skip
    back = bound("acme").response(
        15, 5, 3, answer.__class__(**{**_fields(answer), "groups": (consumer,)})
    )
    shown = back.groups[0].members[0]
    assert read(sub.ConsumerProtocolSubscription, shown.member_metadata).topics == ("orders",)
    topics = read(asg.ConsumerProtocolAssignment, shown.member_assignment).assigned_partitions
    assert [p.topic for p in topics] == ["orders"]


def _fields(entity: Any) -> dict[str, Any]:
    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}
