"""The hostile tenant against the surfaces added after the cross-tenant suite: a
transparent (namespaced) tenant beside prefixed ones, record encryption, the
listener's non-Kafka and pre-authentication paths.

One gateway (SASL PLAIN, authorization, quotas, ``namespaces:`` on the tenants'
listener, the record-encryption filter with a development key manager) in front of the
shared cluster. ``stack.populate`` gives the prefixed victim its topics, records,
groups and transaction (and the prefixed attacker its own); the victim also gets an
encrypted topic. The transparent attacker ``T`` then names the victim's resources by
their cluster-side names (which its namespace puts under ``T.``), by topic id, by "all"
forms and patterns, through APIs and versions not offered, and tries to get the
victim's plaintext out of the encryption filter. Every answer is scanned for the
victim's identifiers and records (those the attacker typed itself excepted: they come
back as its own names), and the victim's state, read straight from the brokers, must
be the same after the module (``snapshot``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.encryption.batch import encode, parse

from ...conftest import GatewayFactory
from ..rawkafka import RawConnection
from .kafkamsg import mentions, request, walk
from .stack import record_batch
from .surfaces import Surfaces, open_surfaces

pytestmark = pytest.mark.integration
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87


@pytest.fixture(scope="module")
def surfaces(
    gateway_factory: GatewayFactory,
    kafka_cluster: KafkaCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Surfaces]:
    yield from open_surfaces(gateway_factory, kafka_cluster, tmp_path_factory.mktemp("surfaces"))


def _named(body: Any, secrets: dict[Any, str]) -> set[Any]:
    """What the attacker typed itself: a name comes back as its own (namespaced) name,
    an id it sent is echoed as Kafka echoes it."""
    typed = set()
    for _path, value in walk(body):
        if isinstance(value, (str, uuid.UUID)) and value in secrets:
            typed.add(value)
    return typed


async def _attack(s: Surfaces, key: int, template: dict[str, Any],
                  versions: list[int] | None = None) -> list[tuple[int, Any]]:  # fmt: skip
    """Send ``template`` as ``T`` at the lowest and highest advertised version (or at
    ``versions``); every answer must be free of the victim's identifiers and records.
    A connection the gateway closes is a refusal (reopened for the next version)."""
    if versions is None:
        low, high = s.advertised[key]
        versions = sorted({low, high})
    answers = []
    conn = await s.stack.connect(s.t)
    try:
        for version in versions:
            body = request(key, version, template)
            secrets = s.secrets()
            s.typed |= _named(body, secrets)  # its own names from now on (ACLs, topics…)
            for typed in s.typed:
                secrets.pop(typed, None)
            try:
                answer, raw = await conn.call(body)
            except (asyncio.IncompleteReadError, ConnectionError):
                conn.close()
                conn = await s.stack.connect(s.t)
                answers.append((version, None))
                continue
            leaked = mentions(answer, secrets)
            leaked += [(v, "raw frame") for v in secrets if isinstance(v, str)
                       and v.encode() in raw]  # fmt: skip
            assert not leaked, f"api {key} v{version} leaked {leaked}: {answer}"
            answers.append((version, answer))
    finally:
        conn.close()
    return answers


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- the transparent tenant names the victim's resources ---------------------------------


def test_metadata_by_cluster_name_id_and_auto_creation(surfaces: Surfaces) -> None:
    c = surfaces.ctx
    named = [{"name": c.vt}, {"name": surfaces.secret_topic}, {"name": c.vt2}]
    run(_attack(surfaces, 3, {"topics": named, "allow_auto_topic_creation": True}))
    high = surfaces.advertised[3][1]
    run(_attack(surfaces, 3, {"topics": [{"topic_id": c.vt_id}, {"topic_id": surfaces.secret_id}],
                              "allow_auto_topic_creation": False}, sorted({10, high})))  # fmt: skip
    run(_attack(surfaces, 3, {"topics": None, "allow_auto_topic_creation": True}))
    # no existence oracle: the victim's topic id is answered as an id that never was
    codes = {}
    for topic_id in (c.vt_id, uuid.uuid4()):
        by_id = {"topics": [{"topic_id": topic_id}], "allow_auto_topic_creation": False}
        ((_v, answer),) = run(_attack(surfaces, 3, by_id, [high]))
        codes[topic_id] = [int(t.error_code) for t in answer.topics]
    assert codes[c.vt_id] == list(codes.values())[1], codes


def test_configs_of_the_victim(surfaces: Surfaces) -> None:
    c = surfaces.ctx
    resources = [{"resource_type": 2, "resource_name": c.vt2}, {"resource_type": 32,
                 "resource_name": c.vg}, {"resource_type": 2, "resource_name": ""}]  # fmt: skip
    run(_attack(surfaces, 32, {"resources": resources, "include_synonyms": True}))
    brokerwide = [{"resource_type": 4, "resource_name": "1"}, {"resource_type": 8,
                  "resource_name": "1"}, {"resource_type": 16, "resource_name": c.vt}]  # fmt: skip
    run(_attack(surfaces, 32, {"resources": brokerwide, "include_synonyms": True}))
    change = [{"name": "retention.ms", "value": "1000", "config_operation": 0}]
    run(_attack(surfaces, 44, {"resources": [{"resource_type": 2, "resource_name": c.vt2,
                                              "configs": change}]}))  # fmt: skip
    run(_attack(surfaces, 33, {"resources": [{"resource_type": 2, "resource_name": c.vt2,
                                              "configs": [{"name": "retention.ms",
                                                           "value": "1000"}]}]}))  # fmt: skip


def test_records_offsets_producers_and_transactions(surfaces: Surfaces) -> None:
    c = surfaces.ctx
    run(_attack(surfaces, 21, {"topics": [{"name": c.vt, "partitions": [
        {"partition_index": 0, "offset": -1}]}], "timeout": 5000}))  # fmt: skip
    run(_attack(surfaces, 47, {"group_id": c.vg, "topics": [{"name": c.vt, "partitions": [
        {"partition_index": 0}]}]}))  # fmt: skip
    run(_attack(surfaces, 61, {"topics": [{"name": c.vt, "partition_indexes": [0, 1, 2]},
                                          {"name": c.vt2, "partition_indexes": [0]}]}))  # fmt: skip
    run(_attack(surfaces, 65, {"transactional_ids": [c.vtx]}))
    for pattern in (None, "", ".*", "[[:alpha:](])|.*|([[:alpha:])]", "[a[b](])|.*|([a[b])]"):
        answers = run(_attack(surfaces, 66, {"state_filters": [], "producer_id_filters": [],
                                             "duration_filter": -1,
                                             "transactional_id_pattern": pattern}))  # fmt: skip
        for _version, answer in answers:
            for state in answer.transaction_states if answer is not None else ():
                assert not str(state.transactional_id).startswith(surfaces.stack.victim.prefix)


def test_groups_and_coordinators(surfaces: Surfaces) -> None:
    c = surfaces.ctx
    run(_attack(surfaces, 10, {"key": c.vg, "key_type": 0, "coordinator_keys": [c.vg, c.vcg]}))
    run(_attack(surfaces, 10, {"key": c.vtx, "key_type": 1, "coordinator_keys": [c.vtx]}))
    run(_attack(surfaces, 15, {"groups": [c.vg, c.vcg]}))
    run(_attack(surfaces, 16, {"states_filter": [], "types_filter": []}))
    run(_attack(surfaces, 9, {"group_id": c.vg, "topics": None,
                              "groups": [{"group_id": c.vg, "topics": None}]}))  # fmt: skip
    run(_attack(surfaces, 69, {"group_ids": [c.vcg, c.vg]}))
    run(_attack(surfaces, 42, {"groups_names": [c.vg, c.vcg]}))
    run(_attack(surfaces, 75, {"topics": [], "response_partition_limit": 2000,
                               "cursor": {"topic_name": c.vt, "partition_index": 0}}))  # fmt: skip
    run(_attack(surfaces, 75, {"topics": [], "response_partition_limit": 2000}))


def test_apis_and_versions_not_offered_are_refused(surfaces: Surfaces) -> None:
    """Topic ids of the victim in Produce/Fetch v13+, and APIs a namespaced tenant is
    not offered (log dirs, reassignments, SCRAM users, client metrics): refused, and
    nothing of the victim in what comes back."""
    c, s = surfaces.ctx, surfaces
    for key in (35, 43, 45, 46, 50, 55, 74):
        assert key not in s.advertised
    assert s.advertised[0][1] <= 12 and s.advertised[1][1] <= 12
    run(_attack(s, 35, {"topics": None}, [1, 4]))
    run(_attack(s, 46, {"topics": None, "timeout_ms": 5000}, [0]))
    run(_attack(s, 50, {"users": None}, [0]))
    run(_attack(s, 43, {"election_type": 0, "topic_partitions": None, "timeout_ms": 5000}, [2]))
    run(_attack(s, 45, {"topics": [{"name": c.vt, "partitions": [
        {"partition_index": 0, "replicas": [1]}]}], "timeout_ms": 5000}, [0]))  # fmt: skip
    run(_attack(s, 55, {"topics": [{"topic_name": "__cluster_metadata",
                                    "partitions": [{"partition_index": 0}]}]}, [0]))  # fmt: skip
    run(_attack(s, 1, {"max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1_000_000,
                       "topics": [{"topic_id": s.secret_id, "partitions": [
                           {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1_000_000,
                            "current_leader_epoch": -1, "log_start_offset": -1}]}]},
                [13, 16]))  # fmt: skip
    run(_attack(s, 0, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"topic_id": c.vt_id, "partition_data": [{"index": 0, "records": c.records}]}]},
        [13]))  # fmt: skip
    run(_attack(s, 20, {"topics": [{"name": None, "topic_id": c.vt_id}], "topic_names": [],
                        "timeout_ms": 5000}))  # fmt: skip


def test_fetch_and_produce_by_cluster_name(surfaces: Surfaces) -> None:
    c, s = surfaces.ctx, surfaces
    fetch = {"max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1_000_000, "isolation_level": 0,
             "topics": [{"topic": name, "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1_000_000,
                  "current_leader_epoch": -1, "log_start_offset": -1}]}
                 for name in (c.vt, s.secret_topic)]}  # fmt: skip
    run(_attack(s, 1, fetch))
    run(_attack(s, 0, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": c.vt, "partition_data": [{"index": 0, "records": c.records}]}]}))  # fmt: skip


def test_unauthenticated_on_the_namespaced_listener(surfaces: Surfaces) -> None:
    """Before SASL: the narrowed ApiVersions, nothing else answered; a wrong secret."""
    s = surfaces

    async def go() -> None:
        conn = await RawConnection.open(s.stack.bootstrap)
        try:
            offered = await conn.api_versions()
            assert 35 not in offered and offered[1][1] <= 12, offered
            await conn.send(request(3, 12, {"topics": None, "allow_auto_topic_creation": False}))
            try:
                frame = await conn.read_frame(10)
            except (asyncio.IncompleteReadError, ConnectionError):
                frame = b""
            assert s.ctx.vt.encode() not in frame and s.stack.victim.prefix.encode() not in frame
        finally:
            conn.close()
        with pytest.raises((AssertionError, asyncio.IncompleteReadError, ConnectionError)):
            await RawConnection.open_plain(s.stack.bootstrap, s.t.key_id, s.t.secret + "x")

    run(go())


def test_http_on_the_tenant_listener_is_not_an_endpoint(surfaces: Surfaces) -> None:
    """``GET /metrics`` or an admin path sent to the Kafka listener: no HTTP answer, the
    connection is closed, the gateway serves others as before."""

    async def go() -> None:
        for path in ("/metrics", "/readyz", "/admin/tenants"):
            host, port = surfaces.stack.bootstrap.rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), 15)
            writer.close()
            assert b"HTTP/" not in data and b"kgw_" not in data, data[:200]
        conn = await surfaces.stack.connect(surfaces.t)
        try:
            assert 3 in await conn.api_versions()
        finally:
            conn.close()

    run(go())


# -- encryption ------------------------------------------------------------------------


def _super_records(s: Surfaces, topic: str, node: int | None = None) -> bytes:
    """The raw records of partition 0 of ``topic`` as the brokers hold them."""

    async def go() -> bytes:
        leader = await _leader(s, topic)
        conn = await s.stack.super_connection(leader)
        try:
            answer, _raw = await conn.call(request(1, 12, {
                "replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 10_000_000,
                "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10_000_000,
                     "current_leader_epoch": -1, "log_start_offset": -1}]}]}))  # fmt: skip
        finally:
            conn.close()
        (part,) = answer.responses[0].partitions
        assert part.error_code == 0, part
        return bytes(part.records or b"")

    return run(go())


async def _leader(s: Surfaces, topic: str) -> int:
    conn = await s.stack.super_connection(s.stack.nodes()[0])
    try:
        for _ in range(60):
            answer, _raw = await conn.call(
                request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
            )
            (entry,) = answer.topics
            if entry.error_code == 0 and entry.partitions[0].leader_id >= 0:
                return int(entry.partitions[0].leader_id)
            await asyncio.sleep(0.5)
    finally:
        conn.close()
    raise AssertionError(f"no leader for {topic}")


def _own_topic(s: Surfaces, tenant_name: str) -> str:
    """A topic ``T`` creates with its plain name; returns the cluster-side name."""
    admin = AdminClient(s.t.conf(s.stack.bootstrap))  # alive until the answer
    admin.create_topics([NewTopic(tenant_name, 1, 3)])[tenant_name].result(60)
    return s.t.prefix + tenant_name


def _produce_raw(s: Surfaces, topic: str, records: bytes, node: int) -> Any:
    async def go() -> Any:
        conn = await s.stack.connect(s.t, node)
        try:
            answer, _raw = await conn.call(request(0, 9, {"acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": records}]}]}))  # fmt: skip
        finally:
            conn.close()
        return answer

    return run(go())


def _fetch_as_t(s: Surfaces, topic: str, node: int) -> Any:
    async def go() -> Any:
        conn = await s.stack.connect(s.t, node)
        try:
            answer, _raw = await conn.call(request(1, 12, {
                "replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 10_000_000,
                "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10_000_000,
                     "current_leader_epoch": -1, "log_start_offset": -1}]}]}))  # fmt: skip
        finally:
            conn.close()
        return answer

    return run(go())


def test_victim_ciphertext_replayed_into_the_attackers_topics(surfaces: Surfaces) -> None:
    """The victim's ciphertext batch (as a backup would hold it) produced by ``T`` into
    its own encrypted and unencrypted topics and fetched back: envelopes at most, never
    the victim's plaintext (the envelope's associated data is the topic)."""
    s = surfaces
    stolen = _super_records(s, s.secret_topic)
    assert stolen and s.secret_marker.encode() not in stolen
    batch = parse(stolen[: 12 + struct.unpack_from(">i", stolen, 8)[0]])
    batch.base_offset = 0
    replay = encode(batch)
    for plain in ("secret-replay", "plain-replay"):
        cluster = _own_topic(s, plain)
        node = asyncio.run(_leader(s, cluster))
        answer = _produce_raw(s, plain, replay, node)
        code = answer.responses[0].partition_responses[0].error_code
        fetched = _fetch_as_t(s, plain, node)
        blob = b"".join(bytes(p.records or b"") for t in fetched.responses for p in t.partitions)
        assert s.secret_marker.encode() not in blob, (plain, code)
        assert s.secret_marker.encode() not in _super_records(s, cluster)


def test_plaintext_tricks_on_an_encrypted_topic(surfaces: Surfaces) -> None:
    """Old magic, a control batch, gzip, and a gzip bomb, written by ``T`` to its own
    encrypted topic: refused or encrypted, never plaintext on the brokers; the gateway
    keeps serving."""
    s = surfaces
    cluster = _own_topic(s, "secret-tricks")
    node = asyncio.run(_leader(s, cluster))
    marker = f"CLEAR-{uuid.uuid4().hex}".encode()
    plain = record_batch(marker)
    old = _message_v1(marker)
    batch = parse(plain)
    batch.attributes = 0x20
    tricks: dict[str, bytes] = {"magic-1": old, "control": encode(batch)}
    batch = parse(plain)
    batch.attributes = 1  # gzip
    tricks["gzip"] = encode(batch)
    bomb = parse(plain)
    bomb.attributes = 1
    big = bomb.records[0]
    bomb.records = [dataclasses.replace(big, value=b"\0" * (80 << 20))]
    tricks["gzip-bomb"] = encode(bomb)
    assert len(tricks["gzip-bomb"]) < 1 << 20
    for name, records in tricks.items():
        answer = _produce_raw(s, "secret-tricks", records, node)
        code = int(answer.responses[0].partition_responses[0].error_code)
        if name in ("magic-1", "control", "gzip-bomb"):
            assert code == INVALID_RECORD, (name, answer)
        held = _super_records(s, cluster)
        assert marker not in held and marker not in _gunzip_all(held), name
    assert 3 in run(_api_versions(s))


async def _api_versions(s: Surfaces) -> dict[int, tuple[int, int]]:
    conn = await s.stack.connect(s.t)
    try:
        return await conn.api_versions()
    finally:
        conn.close()


def _gunzip_all(blob: bytes) -> bytes:
    """Every gzip member found in ``blob``, inflated (bounded)."""
    out = []
    start = blob.find(b"\x1f\x8b")
    while start >= 0:
        with contextlib.suppress(OSError, EOFError):
            out.append(gzip.decompress(blob[start:])[: 1 << 20])
        start = blob.find(b"\x1f\x8b", start + 2)
    return b"".join(out)


def _message_v1(value: bytes) -> bytes:
    """A magic-1 message set of one message (no compression)."""
    import zlib

    body = struct.pack(">bbq", 1, 0, int(time.time() * 1000)) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


# -- last: the ACL attacks (a null filter deletes the attacker's own grants too) --------


def test_acls_covering_other_tenants(surfaces: Surfaces) -> None:
    """CreateAcls/DeleteAcls/DescribeAcls with names, prefixes and patterns that would
    cover the victim on the cluster: nothing of the victim is shown, created or
    removed; what the attacker creates stays inside its own namespace. Last: a null
    DeleteAcls filter removes the attacker's own grants too (as on Kafka)."""
    c, s = surfaces.ctx, surfaces
    victim = s.stack.victim
    creations = [
        {"resource_type": 2, "resource_name": name, "resource_pattern_type": pattern,
         "principal": s.t.principal, "host": "*", "operation": 2, "permission_type": 3}
        for name, pattern in ((c.vt, 3), (victim.prefix, 4), ("", 4), ("*", 3), (victim.name, 4),
                              (c.vt, 2), (c.vt, 1))
    ]  # fmt: skip
    run(_attack(s, 30, {"creations": creations}))
    for name, pattern in ((None, 1), (c.vt, 2), ("*", 3), ("", 4), (victim.prefix, 4)):
        filt = {"resource_type_filter": 1, "resource_name_filter": name,
                "pattern_type_filter": pattern, "principal_filter": None, "host_filter": None,
                "operation": 1, "permission_type": 1}  # fmt: skip
        run(_attack(s, 29, filt))
        run(_attack(s, 31, {"filters": [filt]}))
    time.sleep(0.5)
    lines = set(s.stack.policy_file.read_text().splitlines())
    kept = {line for line in s.policy_lines if s.t.name not in line}  # its own: its to drop
    assert kept <= lines, f"rules removed: {kept - lines}"
    for line in lines - s.policy_lines:
        fields = [f.strip() for f in line.split(",")]
        assert fields[0] == "p" and fields[4].startswith(s.t.prefix), f"created outside: {line}"
