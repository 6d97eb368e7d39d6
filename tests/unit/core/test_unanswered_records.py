"""Every request the gateway took has its access-log record, answered or not: one still
owed when the connection closes, a refused Produce with acks=0, a throttled one, and a
re-authentication refused for changing who the connection is. On the real connection
core and session (``harness``)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.accesslog.exchange import Exchange
from gateway.core import commands as cmd
from gateway.core.events import Closed, Opened, RequestFrames, ResponseFrames

from ..conftest import MakeAuthorizer
from .harness import Harness, build

POLICY = ["p, User:alice, TOPIC, PREFIXED, a., ALL, *, allow"]
NETWORK_EXCEPTION = 13
TOPIC_AUTHORIZATION_FAILED = 29


def records(commands: list[cmd.Command]) -> list[Exchange]:
    return [x for c in commands if isinstance(c, cmd.Record) for x in c.exchanges]


def produce(h: Harness, acks: int, correlation_id: int, topic: str = "a.orders") -> bytes:
    body = {"acks": acks, "topic_data": [{"name": topic, "partition_data": [{"index": 0}]}]}
    return h.request({"api": "Produce", "version": 9, "id": correlation_id, "body": body})


def delete_topics(h: Harness, correlation_id: int, *names: str) -> bytes:
    body: dict[str, Any] = {"topics": [{"name": n} for n in names]}
    return h.request({"api": "DeleteTopics", "version": 6, "id": correlation_id, "body": body})


@pytest.mark.asyncio
async def test_a_forwarded_request_still_owed_at_close_is_recorded(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"observe": True, "policy": POLICY}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    out = h.handle(RequestFrames([delete_topics(h, 1, "a.orders"), produce(h, 1, 2)]))
    assert [c for c in out if isinstance(c, cmd.Forward)]
    assert not records(out)
    h.handle(ResponseFrames([h.response({"id": 1})]))  # DeleteTopics answered, Produce not

    out = h.handle(Closed("client disconnected"))

    (owed,) = records(out)
    assert (owed.api_key, owed.correlation_id) == (0, 2)
    assert owed.error_code == NETWORK_EXCEPTION and owed.bytes_out == 0
    assert owed.decision == "allow" and owed.resources.topics == ("a.orders",)
    assert owed.done is not None
    assert h.session.inflight == 0
    assert records(h.handle(Closed("again"))) == []  # once only


@pytest.mark.asyncio
async def test_records_of_a_gateway_close_come_before_the_close(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"observe": True, "policy": POLICY}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    h.handle(RequestFrames([delete_topics(h, 1, "a.orders")]))

    out = h.handle(ResponseFrames([h.response({"id": 1, "correlation": 99})]))  # a broker fault

    kinds = [type(c) for c in out]
    assert cmd.Record in kinds and cmd.Close in kinds
    assert kinds.index(cmd.Record) < kinds.index(cmd.Close)
    (owed,) = records(out)
    assert owed.api_key == 20 and owed.error_code == NETWORK_EXCEPTION


@pytest.mark.asyncio
async def test_a_denied_produce_with_acks_0_is_recorded_as_denied(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"observe": True, "policy": POLICY}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))

    out = h.handle(RequestFrames([produce(h, 0, 7, topic="secret.payroll")]))

    assert any(isinstance(c, cmd.Close) for c in out)
    (denied,) = records(out)
    assert denied.decision == "deny" and denied.resources.topics == ("secret.payroll",)
    assert denied.error_code == TOPIC_AUTHORIZATION_FAILED and denied.records == 0
    assert denied.correlation_id == 7


@pytest.mark.asyncio
async def test_a_filter_refused_produce_with_acks_0_is_recorded(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    from gateway.filters.api import BaseFilter, RequestCall
    from gateway.filters.chain import FilterChain
    from gateway.protocol import apis

    class NoProduce(BaseFilter):
        name = "no-produce"
        api_keys = frozenset({apis.PRODUCE})

        def on_request(self, call: RequestCall) -> None:
            from kio.schema.errors import ErrorCode

            call.reject(ErrorCode.policy_violation, "not here")

    h = await build({"observe": True}, tmp_path, make_authorizer)
    h.session.filters = FilterChain([NoProduce()]).bind(h.identity)
    h.session.stages = h.session._chain()
    h.handle(Opened(h.identity.host))

    out = h.handle(RequestFrames([produce(h, 0, 3)]))

    assert any(isinstance(c, cmd.Close) for c in out)
    (refused,) = records(out)
    assert refused.decision == "deny" and refused.rule == "filter:no-produce"
    assert refused.error_code == 44  # POLICY_VIOLATION


@pytest.mark.asyncio
async def test_a_throttled_produce_with_acks_0_records_its_throttle(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    quotas = {"store": {"tenant:acme": {"requests": 1, "requests_burst": 1}}}
    h = await build(
        {"observe": True, "tenant": "acme", "quotas": quotas}, tmp_path, make_authorizer
    )
    h.handle(Opened(h.identity.host))
    first = records(h.handle(RequestFrames([produce(h, 0, 1)])))
    out = h.handle(RequestFrames([produce(h, 0, 2)]))

    timers = [c for c in out if isinstance(c, cmd.StartTimer)]
    assert timers, "the second request over the limit mutes the connection"
    (second,) = records(out)
    assert first[0].throttle_ms == 0
    assert second.throttle_ms == pytest.approx(timers[0].seconds * 1000, abs=1)
    assert second.throttle_ms > 0


def _sasl(h: Harness, correlation_id: int) -> list[bytes]:
    handshake = {"api": "SaslHandshake", "version": 1, "id": correlation_id}
    handshake["body"] = {"mechanism": "PLAIN"}
    login = {"api": "SaslAuthenticate", "version": 2, "id": correlation_id + 1, "plain": "right"}
    return [h.request(handshake), h.request(login)]


@pytest.mark.asyncio
async def test_a_reauthentication_as_another_principal_is_a_failed_login(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"auth": "sasl", "observe": True}, tmp_path, make_authorizer)
    assert h.sasl is not None and h.sasl.store is not None
    other, other_secret = await h.sasl.store.create_api_key(
        principal="User:mallory", tenant="other", actor="test"
    )
    h.handle(Opened(h.identity.host))
    h.handle(RequestFrames(_sasl(h, 1)))
    out = h.handle(await h.step_done("ok"))
    (first,) = [c for c in out if isinstance(c, cmd.LoginOutcome)]
    assert first.step.succeeded and h.identity.principal == "User:alice"

    h.key_id, h.secret = other.key_id, other_secret  # the right secret of another key
    h.handle(RequestFrames(_sasl(h, 3)))
    out = h.handle(await h.step_done("ok"))

    (again,) = [c for c in out if isinstance(c, cmd.LoginOutcome)]
    assert not again.step.succeeded
    assert again.step.reason == "reauth_changed_identity"
    assert again.step.claimed == other.key_id
    assert h.identity.principal == "User:alice" and h.identity.tenant == "acme"
    await h.close()


@pytest.mark.asyncio
async def test_a_reauthentication_as_the_same_principal_still_succeeds(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"auth": "sasl", "observe": True}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    h.handle(RequestFrames(_sasl(h, 1)))
    h.handle(await h.step_done("ok"))
    h.handle(RequestFrames(_sasl(h, 3)))
    out = h.handle(await h.step_done("ok"))
    (again,) = [c for c in out if isinstance(c, cmd.LoginOutcome)]
    assert again.step.succeeded and not any(isinstance(c, cmd.Close) for c in out)
    await h.close()


@pytest.mark.asyncio
async def test_a_partial_record_names_the_parts_refused(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"observe": True, "policy": POLICY}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    body = {
        "acks": -1,
        "topic_data": [
            {"name": "a.orders", "partition_data": [{"index": 0}]},
            {"name": "b.payroll", "partition_data": [{"index": 0}]},
        ],
    }
    h.handle(RequestFrames([h.request({"api": "Produce", "version": 9, "id": 5, "body": body})]))
    reply = {"responses": [{"name": "a.orders", "partition_responses": [{"index": 0}]}]}
    out = h.handle(ResponseFrames([h.response({"body": reply})]))

    (partial,) = records(out)
    assert partial.decision == "partial"
    assert partial.resources.topics == ("a.orders", "b.payroll")
    assert partial.resources.denied == ("topic:b.payroll",)


@pytest.mark.asyncio
async def test_a_fetch_record_names_the_topics_refused(
    tmp_path: Any, make_authorizer: MakeAuthorizer
) -> None:
    h = await build({"observe": True, "policy": POLICY}, tmp_path, make_authorizer)
    h.handle(Opened(h.identity.host))
    topics = [
        {"topic": name, "partitions": [{"partition": 0}]}
        for name in ("a.orders", "b.payroll", "b.payroll")
    ]
    body = {"replica_id": -1, "max_wait": 500, "topics": topics}
    out = h.handle(
        RequestFrames([h.request({"api": "Fetch", "version": 12, "id": 6, "body": body})])
    )
    assert [c for c in out if isinstance(c, cmd.Forward)]
    reply = {"responses": [{"topic": "a.orders", "partitions": [{"partition_index": 0}]}]}
    out = h.handle(ResponseFrames([h.response({"body": reply})]))

    (partial,) = records(out)
    assert partial.decision == "partial"
    assert partial.resources.denied == ("topic:b.payroll",)
