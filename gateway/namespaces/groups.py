"""Classic consumer groups' embedded protocol: topic names inside JoinGroup's member
metadata (``ConsumerProtocolSubscription``) and SyncGroup's assignments
(``ConsumerProtocolAssignment``), mapped like every other name. Pure.

The broker does not read these bytes for ``protocol_type == "consumer"`` groups except
to show them (DescribeGroups, ``kafka-consumer-groups.sh --describe``) and to convert
classic members when a group moves to the KIP-848 protocol (online migration). So on
the cluster they hold cluster-side names, like everything else: operators see
``acme.orders``, a migrated group's subscriptions are real topics, and a tenant never
reads another's names in them (on the way back, foreign entries are left out).

Each blob starts with its int16 version; Kafka reads a version newer than it knows with
the newest schema it knows and ignores what follows, and so does this module (the
rest is kept as it is). ``user_data`` is the assignor's and stays as written (Kafka
Streams' assignment info inside it keeps the client's names: a known limit).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from .names import NameRefused, Namespace

CONSUMER = "consumer"  # the protocol type whose blobs carry topic names
NEWEST = 3  # the newest version of both schemas kio knows
_VERSION = struct.Struct(">h")
Convert = Callable[[str], "str | None"]


@cache
def _schema(kind: str, version: int) -> type[Any]:
    module = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}")
    schema: type[Any] = getattr(module, f"ConsumerProtocol{kind.title()}")
    return schema


def _decode(kind: str, blob: bytes) -> tuple[int, Any, bytes]:
    if len(blob) < 2:
        raise NameRefused(f"consumer protocol {kind} shorter than its version")
    version = _VERSION.unpack_from(blob, 0)[0]
    if version < 0:
        raise NameRefused(f"consumer protocol {kind} version {version}")
    schema = _schema(kind, min(version, NEWEST))
    try:
        entity, size = entity_reader(schema)(blob, 2)
    except (DecodeError, ValueError, UnicodeDecodeError, KeyError, IndexError) as exc:
        raise NameRefused(f"cannot decode the consumer protocol {kind}: {exc}") from None
    rest = blob[2 + size :]
    if rest and version <= NEWEST:
        raise NameRefused(f"consumer protocol {kind} v{version} has trailing bytes")
    return version, entity, rest


def _encode(version: int, entity: Any, rest: bytes) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    entity_writer(type(entity))(buffer, entity)
    buffer.write(rest)
    return buffer.getvalue()


def _partitions(entries: tuple[Any, ...], convert: Convert) -> tuple[Any, ...]:
    kept = []
    for entry in entries:
        name = convert(entry.topic)
        if name is not None:
            kept.append(dataclasses.replace(entry, topic=name))
    return tuple(kept)


def map_subscription(blob: bytes, convert: Convert) -> bytes:
    """A member's subscription with every topic name converted (``None``: left out)."""
    version, entity, rest = _decode("subscription", blob)
    topics = tuple(n for n in (convert(t) for t in entity.topics) if n is not None)
    changes: dict[str, Any] = {"topics": topics}
    if hasattr(entity, "owned_partitions"):
        changes["owned_partitions"] = _partitions(entity.owned_partitions, convert)
    return _encode(version, dataclasses.replace(entity, **changes), rest)


def map_assignment(blob: bytes, convert: Convert) -> bytes:
    """A member's assignment with every topic name converted (``None``: left out)."""
    if not blob:  # a follower's empty assignment in SyncGroup, or none yet
        return blob
    version, entity, rest = _decode("assignment", blob)
    assigned = _partitions(entity.assigned_partitions, convert)
    return _encode(version, dataclasses.replace(entity, assigned_partitions=assigned), rest)


JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 14, 15
GROUP_APIS = frozenset({JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS})


def map_request_blobs(ns: Namespace, key: int, body: Any) -> Any:
    """JoinGroup's subscriptions or SyncGroup's assignments (of a consumer group: the
    caller decides) in cluster-side names. ``NameRefused`` when one cannot be read."""
    if key == JOIN_GROUP:
        protocols = tuple(
            dataclasses.replace(p, metadata=map_subscription(p.metadata, ns.to_cluster))
            for p in body.protocols
        )
        return dataclasses.replace(body, protocols=protocols)
    if key == SYNC_GROUP:
        assignments = tuple(
            dataclasses.replace(a, assignment=map_assignment(a.assignment, ns.to_cluster))
            for a in body.assignments
        )
        return dataclasses.replace(body, assignments=assignments)
    return body


def map_response_blobs(ns: Namespace, key: int, body: Any, consumer: bool) -> Any:
    """The members' subscriptions and assignments of a response in the tenant's names,
    other tenants' topics left out (DescribeGroups: per group, by its protocol type).
    ``NameRefused`` when one cannot be read."""
    if key == JOIN_GROUP and consumer:
        members = tuple(
            dataclasses.replace(m, metadata=map_subscription(m.metadata, ns.to_tenant))
            for m in body.members
        )
        return dataclasses.replace(body, members=members)
    if key == SYNC_GROUP and consumer:
        return dataclasses.replace(body, assignment=map_assignment(body.assignment, ns.to_tenant))
    if key == DESCRIBE_GROUPS:
        return dataclasses.replace(body, groups=tuple(_described(ns, g) for g in body.groups))
    return body


def _described(ns: Namespace, group: Any) -> Any:
    if group.protocol_type != CONSUMER:
        return group
    members = []
    for member in group.members:
        metadata = member.member_metadata
        members.append(
            dataclasses.replace(
                member,
                member_metadata=map_subscription(metadata, ns.to_tenant) if metadata else metadata,
                member_assignment=map_assignment(member.member_assignment, ns.to_tenant),
            )
        )
    return dataclasses.replace(group, members=tuple(members))
