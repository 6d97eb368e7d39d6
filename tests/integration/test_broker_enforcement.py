"""Defense in depth (decision 0026): the gateway logs in to the brokers as each tenant,
the brokers run ``StandardAuthorizer`` with ACLs the gateway keeps in step with the
policy, and with ``authorization.gateway_checks: false`` the brokers alone refuse every
cross-tenant request. No broker connection exists for a client that has not
authenticated."""

from __future__ import annotations

import asyncio
import datetime
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from gateway.protocol.codec import decode_response, encode_request
from gateway.upstream.client import BrokerClient
from gateway.upstream.identity import UpstreamIdentity
from gateway.upstream.provision import TenantIdentities
from gateway.upstream.scram_client import UpstreamAuthError
from gateway.upstream.settings import TenantIdentitiesConfig, UpstreamSaslConfig
from gateway.upstream.tenant_identity import TenantSecret

from .broker_enforced import (  # noqa: F401 - fixtures
    GATEWAY_USER,
    SYNC_S,
    EnforcedStack,
    Tenant,
    enforced_cluster_fixture,
    enforced_stack_fixture,
    gateway_log_events,
    upstream_sockets,
    wait_for,
)
from .rawkafka import RawConnection

pytestmark = pytest.mark.integration


def _tenants(stack: EnforcedStack) -> tuple[Tenant, Tenant]:
    a, b = stack.tenants
    return a, b


def _produce(tenant: Tenant, topic: str, count: int = 5) -> list[Any]:
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(tenant.client(acks="all", **{"message.timeout.ms": 15000}))
    for i in range(count):
        producer.produce(topic, value=f"r{i}".encode(), on_delivery=report)
    producer.flush(30)
    return errors


def _consume(tenant: Tenant, topic: str, group: str, count: int) -> list[bytes]:
    consumer = Consumer(tenant.client(**{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
    }))  # fmt: skip
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def _acls(stack: EnforcedStack, principal: str) -> set[tuple[str, str, str]]:
    flt = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    admin = stack.admin()  # referenced until the result is in
    found = admin.describe_acls(flt).result(30)
    return {(b.name, b.resource_pattern_type.name, b.operation.name) for b in found}


def test_own_namespace_works_end_to_end(enforced_stack: EnforcedStack) -> None:
    a, _ = _tenants(enforced_stack)
    topic = a.topic()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(a.client())
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)  # CREATE, by the broker
    assert _produce(a, topic) == []
    assert _consume(a, topic, f"{a.prefix}g", 5) == [f"r{i}".encode() for i in range(5)]
    principal = f"User:kgw-t-{a.name}"
    assert (a.prefix, "PREFIXED", "ALL") in _acls(enforced_stack, principal)
    assert gateway_log_events(enforced_stack.gateway, "tenant_identity_provisioned")
    assert gateway_log_events(enforced_stack.gateway, "gateway_checks_off")


def test_the_brokers_refuse_cross_tenant_requests(enforced_stack: EnforcedStack) -> None:
    a, b = _tenants(enforced_stack)
    topic, group = b.topic("secret"), f"{b.prefix}grp"
    enforced_stack.create_topic(topic)
    assert _produce(b, topic, 2) == []
    assert len(_consume(b, topic, group, 2)) == 2  # b's group now exists with offsets

    errors = _produce(a, topic, 1)  # Produce
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors

    from confluent_kafka.admin import AdminClient

    admin = AdminClient(a.client())
    metadata = admin.list_topics(topic, timeout=15)  # Metadata
    assert metadata.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    described = admin.describe_consumer_groups([group])[group]  # DescribeGroups
    with pytest.raises(KafkaException) as denied:
        described.result(30)
    assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    listener = enforced_stack.gateway.config["listeners"][1]
    node = f"127.0.0.1:{listener['broker_port_base'] + 1}"  # one node: the coordinator
    commit = asyncio.run(_offset_commit(node, a, group, topic))  # OffsetCommit into b's group
    assert commit.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed

    fetch = asyncio.run(_fetch(node, a, topic))  # Fetch of b's partition
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    assert not fetch.responses[0].partitions[0].records

    # no gateway decision was involved: the sessions have no Enforcer
    assert not gateway_log_events(enforced_stack.gateway, "authorization_denied")


async def _offset_commit(address: str, tenant: Tenant, group: str, topic: str) -> Any:
    conn = await RawConnection.open_plain(address, tenant.username, tenant.secret)
    try:
        part = OffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(1), committed_metadata=None
        )
        body = OffsetCommitRequest(
            group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="",
            topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(part,)),),
        )  # fmt: skip
        return await conn.request(body, OffsetCommitResponse)
    finally:
        conn.close()


async def _fetch(address: str, tenant: Tenant, topic: str) -> Any:
    conn = await RawConnection.open_plain(address, tenant.username, tenant.secret)
    try:
        part = FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(65536))
        body = FetchRequest(
            cluster_id=None, max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
            min_bytes=i32(1), topics=(FetchTopic(topic=TopicName(topic), partitions=(part,)),),
            forgotten_topics_data=(),
        )  # fmt: skip
        return await conn.request(body, FetchResponse)
    finally:
        conn.close()


def _kgw_policy(stack: EnforcedStack, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "policy", *args,
         "--config", str(stack.gateway.config_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_policy_changes_reach_the_brokers(enforced_stack: EnforcedStack) -> None:
    a, b = _tenants(enforced_stack)
    topic = b.topic("shared")
    enforced_stack.create_topic(topic)
    principal = f"User:kgw-t-{a.name}"
    grant = (topic, "LITERAL", "DESCRIBE")
    assert grant not in _acls(enforced_stack, principal)
    began = time.monotonic()
    _kgw_policy(enforced_stack, "add", "--principal", f"User:{a.name}.app",
                "--operation", "DESCRIBE", "--topic", topic)  # fmt: skip
    wait_for(lambda: grant in _acls(enforced_stack, principal), 10 * SYNC_S, "grant mirrored")
    assert time.monotonic() - began < 10 * SYNC_S
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(a.client()).list_topics(topic, timeout=15)
    assert metadata.topics[topic].error is None  # the broker now lets a describe it
    _kgw_policy(enforced_stack, "remove", "--principal", f"User:{a.name}.app", "--topic", topic)
    wait_for(lambda: grant not in _acls(enforced_stack, principal), 10 * SYNC_S, "revoked")


def test_acls_changed_behind_the_gateway_are_reported_and_restored(
    enforced_stack: EnforcedStack,
) -> None:
    a, _ = _tenants(enforced_stack)
    principal = f"User:kgw-t-{a.name}"
    wanted = (a.prefix, "PREFIXED", "ALL")
    assert wanted in _acls(enforced_stack, principal)
    before = len(gateway_log_events(enforced_stack.gateway, "broker_acl_drift"))
    admin = enforced_stack.admin()
    flt = AclBindingFilter(
        ResourceType.TOPIC, a.prefix, ResourcePatternType.PREFIXED, principal, "*",
        AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.delete_acls([flt])[flt].result(30)
    intruder = AclBinding(
        ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, principal, "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([intruder])[intruder].result(30)
    drift = wait_for(
        lambda: gateway_log_events(enforced_stack.gateway, "broker_acl_drift")[before:],
        10 * SYNC_S, "drift reported",
    )  # fmt: skip
    assert drift[0]["count"] >= 2, drift  # one missing, one unexpected
    assert "1 missing" in drift[0]["reason"] and "1 unexpected" in drift[0]["reason"]
    intruded = ("x", "LITERAL", "READ")

    def restored() -> bool:  # creations and deletions reach the brokers' view separately
        acls = _acls(enforced_stack, principal)
        return wanted in acls and intruded not in acls

    wait_for(restored, 10 * SYNC_S, "restored: the missing ACL back, the intruder gone")


def test_no_broker_connection_before_authentication(enforced_stack: EnforcedStack) -> None:
    gateway = enforced_stack.gateway
    assert gateway.pid is not None
    ports = {port for _, port in enforced_stack.cluster.brokers.values()}

    async def hold() -> tuple[int, list[dict[int, tuple[int, int]]]]:
        conns = [await RawConnection.open(enforced_stack.sasl_bootstrap) for _ in range(20)]
        try:
            answers = [await c.api_versions() for c in conns]  # answered, pre-auth
            await asyncio.sleep(1.0)
            held = max(upstream_sockets(gateway.pid or 0, ports) for _ in range(5))
            return held, answers
        finally:
            for conn in conns:
                conn.close()

    held, answers = asyncio.run(hold())
    assert held <= 2, f"{held} broker connections for 20 unauthenticated clients"
    assert all(18 in versions and 0 in versions for versions in answers)

    async def one() -> ApiVersionsResponse:  # the same intersection as before: no SASL yet
        conn = await RawConnection.open(enforced_stack.sasl_bootstrap)
        try:
            body = ApiVersionsRequest(client_software_name="t", client_software_version="1")
            return await conn.request(body, ApiVersionsResponse)
        finally:
            conn.close()

    response = asyncio.run(one())
    keys = {int(e.api_key) for e in response.api_keys}
    assert {0, 1, 3, 17, 18, 36} <= keys


def test_rotation_keeps_live_connections_and_moves_new_logins(
    enforced_stack: EnforcedStack,
) -> None:
    """Against the real brokers: a broker connection authenticated with generation g
    keeps working after g+1 is upserted; new logins need g+1, g's password is refused."""
    host, port = enforced_stack.cluster.brokers[1]
    work = enforced_stack.workdir
    settings = TenantIdentitiesConfig(secret_file=work / "tenant-upstream.secret")
    gateway_login = UpstreamIdentity.load(UpstreamSaslConfig(
        mechanism="SCRAM-SHA-512", username=GATEWAY_USER, password_file=work / "upstream.pass",
    ))  # fmt: skip

    broker = BrokerClient([(host, port)], timeout_s=10)

    async def admin(request: Any, response_type: type[Any]) -> Any:
        as_gateway = broker.with_identity(gateway_login)
        return await as_gateway.roundtrip((host, port), request, response_type)

    now = [time.time()]
    ids = TenantIdentities(TenantSecret.load(settings), admin, 5, lambda: now[0])
    tenant = f"rot{uuid.uuid4().hex[:6]}"
    metadata = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )

    async def run() -> None:
        old = await ids.login(tenant)
        await asyncio.sleep(0.5)  # the credential reaches the broker's metadata
        reader, writer = await asyncio.open_connection(host, port)
        try:
            await old.login(reader, writer)  # a live connection, generation g
            now[0] += settings.rotate_interval_s
            assert await ids.rotate_due() == 1
            new = await ids.login(tenant)
            assert new.credential.generation == old.credential.generation + 1
            await asyncio.sleep(0.5)
            writer.write(encode_request(3, 12, 7, "t", metadata))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            answer = decode_response(await reader.readexactly(size), 3, 12, MetadataResponse)
            assert answer.brokers  # the live connection still works
        finally:
            writer.close()
        await broker.with_identity(new).roundtrip((host, port), metadata, MetadataResponse)
        with pytest.raises(UpstreamAuthError):
            await broker.with_identity(old).roundtrip((host, port), metadata, MetadataResponse)

    asyncio.run(run())


def test_with_gateway_checks_on_both_refuse(enforced_stack: EnforcedStack) -> None:
    """The default mode: the gateway decides first (its own denial), tenants still work."""
    a, b = _tenants(enforced_stack)
    gateway = enforced_stack.start_gateway(gateway_checks=True)
    bootstrap = {"bootstrap.servers": EnforcedStack.sasl_bootstrap_of(gateway)}
    mine, theirs = a.topic("checked"), b.topic("checked")
    enforced_stack.create_topic(mine)
    enforced_stack.create_topic(theirs)
    via = Tenant(a.name, a.prefix, a.username, a.secret, bootstrap["bootstrap.servers"])
    assert _produce(via, mine, 3) == []
    errors = _produce(via, theirs, 1)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert not gateway_log_events(gateway, "gateway_checks_off")
    assert not gateway_log_events(gateway, "upstream_auth_failed")
