"""The gateway's broker client (``BrokerClient``) against a scripted loopback broker:
the login comes before the first request, responses are matched to their request,
bootstrap servers are tried in turn, and failures name the broker, never the secret.
The real SASL cluster is in tests/integration/test_accesslog_topic_sasl.py."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseBroker
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from gateway.protocol.codec import (
    ProtocolError,
    decode_request,
    encode_request,
    encode_response,
    parse_request_head,
)
from gateway.upstream.client import BrokerClient, BrokerUnavailable
from gateway.upstream.identity import UpstreamIdentity
from gateway.upstream.scram_client import UpstreamAuthError
from gateway.upstream.settings import UpstreamSaslConfig

PASSWORD = "the-gateway-password"
METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


class FakeBroker:
    """Answers SaslHandshake/SaslAuthenticate (PLAIN) and Metadata v12 like a broker with a
    SASL listener: Metadata before a successful login closes the connection."""

    def __init__(self) -> None:
        self.seen: list[int] = []  # api keys, in order, over all connections
        self.connections = 0
        self.correlation_shift = 0  # answer with another correlation id
        self.size_override: int | None = None  # announce this response size instead
        self.require_login = True
        self.server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        authenticated = False
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                head = parse_request_head(payload)
                self.seen.append(head.api_key)
                if head.api_key == 17:
                    body = SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=("PLAIN",))
                    writer.write(encode_response(17, 1, head.correlation_id, body))
                elif head.api_key == 36:
                    request = decode_request(head, payload)
                    given = bytes(request.auth_bytes)  # type: ignore[attr-defined]
                    authenticated = given == b"\0kgw\0" + PASSWORD.encode()
                    writer.write(encode_response(36, 1, head.correlation_id, _auth(authenticated)))
                elif head.api_key == 18:  # ApiVersions before SASL: any bytes will do here
                    writer.write(struct.pack(">ii", 8, head.correlation_id) + b"APIV")
                elif head.api_key == 3:
                    if self.require_login and not authenticated:
                        break  # what Kafka does with a request before SASL
                    frame = encode_response(
                        3, 12, head.correlation_id + self.correlation_shift, _metadata()
                    )
                    if self.size_override is not None:
                        frame = struct.pack(">i", self.size_override) + frame[4:]
                    writer.write(frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _auth(ok: bool) -> SaslAuthenticateResponse:
    code = ErrorCode.none if ok else ErrorCode.sasl_authentication_failed
    message = None if ok else "Authentication failed: Invalid username or password"
    fields = SaslAuthenticateResponse.__dataclass_fields__
    values: dict[str, object] = {"error_code": code, "error_message": message, "auth_bytes": b""}
    if "session_lifetime" in fields:
        values["session_lifetime"] = datetime.timedelta(0)
    return SaslAuthenticateResponse(**values)  # type: ignore[arg-type]


def _metadata() -> MetadataResponse:
    brokers = tuple(
        MetadataResponseBroker(node_id=BrokerId(n), host="10.0.0.1", port=i32(9092 + n))
        for n in (1, 2)
    )
    return MetadataResponse(throttle_time=datetime.timedelta(0), brokers=brokers, topics=())


@pytest_asyncio.fixture(loop_scope="function")
async def broker() -> AsyncIterator[FakeBroker]:
    fake = FakeBroker()
    fake.server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    try:
        yield fake
    finally:
        fake.server.close()
        await fake.server.wait_closed()


def _identity(tmp_path: Path, password: str = PASSWORD) -> UpstreamIdentity:
    path = tmp_path / "pw"
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return UpstreamIdentity.load(
        UpstreamSaslConfig(mechanism="PLAIN", username="kgw", password_file=path)
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_every_request_logs_in_first(broker: FakeBroker, tmp_path: Path) -> None:
    client = BrokerClient([broker.address], identity=_identity(tmp_path), timeout_s=5)
    brokers = await client.brokers(broker.address)
    assert brokers == {1: ("10.0.0.1", 9093), 2: ("10.0.0.1", 9094)}
    answer = await client.ask(METADATA, MetadataResponse)
    assert len(answer.brokers) == 2
    assert broker.seen == [17, 36, 3, 17, 36, 3]
    assert broker.connections == 2  # one connection per roundtrip


async def test_without_a_login_a_sasl_broker_hangs_up(broker: FakeBroker) -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        await BrokerClient([broker.address], timeout_s=5).brokers(broker.address)
    assert broker.seen == [3]


async def test_a_refused_login_names_the_broker_not_the_secret(
    broker: FakeBroker, tmp_path: Path
) -> None:
    wrong = "not-" + PASSWORD
    client = BrokerClient([broker.address], identity=_identity(tmp_path, wrong), timeout_s=5)
    with pytest.raises(UpstreamAuthError, match="sasl_authentication_failed") as refused:
        await client.roundtrip(broker.address, METADATA, MetadataResponse)
    assert wrong not in str(refused.value)
    with pytest.raises(BrokerUnavailable) as failed:
        await client.ask(METADATA, MetadataResponse)
    host, port = broker.address
    assert failed.value.reason.startswith(f"{host}:{port}: broker refused the gateway's")
    assert failed.value.brief == f"{host}:{port}: UpstreamAuthError"
    assert wrong not in failed.value.reason and PASSWORD not in failed.value.reason
    assert 3 not in broker.seen  # no request went out unauthenticated


async def test_one_connection_serves_requests_in_turn(broker: FakeBroker, tmp_path: Path) -> None:
    client = BrokerClient([broker.address], identity=_identity(tmp_path), timeout_s=5)
    connection = await client.connect(broker.address)
    try:
        for _ in range(3):
            answer = await connection.request(METADATA, MetadataResponse)
            assert len(answer.brokers) == 2
    finally:
        connection.close()
    assert broker.connections == 1
    assert broker.seen == [17, 36, 3, 3, 3]


async def test_an_answer_to_another_request_is_a_protocol_error(
    broker: FakeBroker, tmp_path: Path
) -> None:
    broker.correlation_shift = 5
    client = BrokerClient([broker.address], identity=_identity(tmp_path), timeout_s=5)
    with pytest.raises(ProtocolError, match="answered another request"):
        await client.roundtrip(broker.address, METADATA, MetadataResponse)


async def test_an_oversized_response_is_refused_before_it_is_read(
    broker: FakeBroker, tmp_path: Path
) -> None:
    broker.size_override = 200 * 1024 * 1024
    client = BrokerClient([broker.address], identity=_identity(tmp_path), timeout_s=5)
    with pytest.raises(ProtocolError, match="response of 209715200 bytes"):
        await client.roundtrip(broker.address, METADATA, MetadataResponse)


async def test_raw_roundtrip_does_not_log_in(broker: FakeBroker, tmp_path: Path) -> None:
    client = BrokerClient([broker.address], identity=_identity(tmp_path), timeout_s=5)
    body = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    frame = encode_request(18, 3, 77, "a-client", body)  # a client's frame, passed as is
    answer = await client.ask_raw(frame)
    assert answer == struct.pack(">ii", 8, 77) + b"APIV"
    assert broker.seen == [18]


async def test_the_next_bootstrap_server_answers(broker: FakeBroker, tmp_path: Path) -> None:
    dead = ("127.0.0.1", _closed_port())
    client = BrokerClient([dead, broker.address], identity=_identity(tmp_path), timeout_s=5)
    for _ in range(2):  # whichever the rotation starts with
        answer = await client.ask(METADATA, MetadataResponse)
        assert len(answer.brokers) == 2


async def test_no_bootstrap_server_answering_names_the_last_one() -> None:
    port = _closed_port()
    client = BrokerClient([("127.0.0.1", port)], timeout_s=1)
    with pytest.raises(BrokerUnavailable, match=rf"^127\.0\.0\.1:{port}: ") as failed:
        await client.ask(METADATA, MetadataResponse)
    assert failed.value.address == ("127.0.0.1", port)
    with pytest.raises(BrokerUnavailable, match=r"^no bootstrap server$"):
        await BrokerClient([]).ask(METADATA, MetadataResponse)


def test_bootstrap_servers_rotate() -> None:
    client = BrokerClient([("a", 1), ("b", 2), ("c", 3)])
    firsts = [client.bootstrap()[0] for _ in range(3)]
    assert sorted(firsts) == [("a", 1), ("b", 2), ("c", 3)]
    assert sorted(client.bootstrap()) == [("a", 1), ("b", 2), ("c", 3)]
    assert BrokerClient([]).bootstrap() == []


def test_tls_settings_for_new_connections() -> None:
    assert BrokerClient([("a", 1)]).connect_kwargs() == {}
    context = ssl.create_default_context()
    kwargs = BrokerClient([("a", 1)], tls=context, timeout_s=7).connect_kwargs()
    assert kwargs == {"ssl": context, "ssl_handshake_timeout": 7}


def test_another_identity_keeps_servers_and_tls(tmp_path: Path) -> None:
    context = ssl.create_default_context()
    client = BrokerClient([("a", 1)], tls=context, timeout_s=3, handshake_timeout_s=2)
    identity = _identity(tmp_path)
    other = client.with_identity(identity)
    assert other.identity is identity and client.identity is None
    assert other.connect_kwargs() == client.connect_kwargs()
    assert other.bootstrap() == [("a", 1)] and other.timeout_s == 3
