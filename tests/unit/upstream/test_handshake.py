"""The gateway's upstream SASL exchange (``UpstreamHandshake`` and
``UpstreamIdentity.login``) against the gateway's own server-side mechanisms,
which play the broker: SaslHandshake v1 and SaslAuthenticate v1 frames, kio
encoded, with no broker process."""

from __future__ import annotations

import asyncio
import datetime
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.credentials import CredentialStore
from gateway.credentials.file_backend import FileBackend
from gateway.protocol.codec import decode_request, encode_response, parse_request_head
from gateway.sasl import SaslServer
from gateway.upstream.handshake import UpstreamHandshake
from gateway.upstream.identity import UpstreamIdentity
from gateway.upstream.scram_client import UpstreamAuthError
from gateway.upstream.settings import UpstreamSaslConfig

PASSWORD = "gw-upstream-pw"


@pytest_asyncio.fixture(loop_scope="function")
async def broker_sasl(tmp_path: Path) -> AsyncIterator[SaslServer]:
    """The server side a broker would run, with the user ``kgw`` for both SCRAM hashes."""
    store = CredentialStore(FileBackend(tmp_path / "credentials.json"))
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        await store.put_scram("kgw", mechanism, PASSWORD, iterations=4096, actor="test")
    server = SaslServer(("SCRAM-SHA-256", "SCRAM-SHA-512"), store=store, scram_iterations=4096)
    try:
        yield server
    finally:
        await server.close()
        await store.close()


class Broker:
    """Answers one connection's SASL frames like Kafka's broker does."""

    def __init__(self, server: SaslServer, offered: tuple[str, ...]) -> None:
        self.server = server
        self.offered = offered
        self.mechanism = None
        self.requests: list[int] = []

    async def answer(self, frame: bytes) -> bytes:
        payload = memoryview(frame)[4:]
        head = parse_request_head(payload)
        request = decode_request(head, payload)
        self.requests.append(head.api_key)
        if head.api_key == 17:
            chosen = request.mechanism  # type: ignore[attr-defined]
            ok = chosen in self.offered
            if ok:
                self.mechanism = self.server.start(chosen, "127.0.0.1")  # type: ignore[assignment]
            code = ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism
            body = SaslHandshakeResponse(error_code=code, mechanisms=self.offered)
            return encode_response(17, 1, head.correlation_id, body)
        assert self.mechanism is not None
        step = await self.mechanism.step(bytes(request.auth_bytes))  # type: ignore[attr-defined]
        if step.done and not step.succeeded:
            answer = _response(ErrorCode.sasl_authentication_failed, step.error, b"")
        else:
            answer = _ok(step.challenge or b"")
        return encode_response(36, 1, head.correlation_id, answer)


def _ok(auth_bytes: bytes) -> SaslAuthenticateResponse:
    return _response(ErrorCode.none, None, auth_bytes)


def _response(code: ErrorCode, message: str | None, auth_bytes: bytes) -> SaslAuthenticateResponse:
    fields = SaslAuthenticateResponse.__dataclass_fields__
    values: dict[str, object] = {
        "error_code": code, "error_message": message, "auth_bytes": auth_bytes,
    }  # fmt: skip
    if "session_lifetime" in fields:
        values["session_lifetime"] = datetime.timedelta(0)
    return SaslAuthenticateResponse(**values)  # type: ignore[arg-type]


async def _drive(handshake: UpstreamHandshake, broker: Broker) -> None:
    frame: bytes | None = handshake.start()
    while frame is not None:
        frame = handshake.on_frame(await broker.answer(frame))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_against_a_real_server_side(broker_sasl: SaslServer, mechanism: str) -> None:
    handshake = UpstreamHandshake(mechanism, "kgw", PASSWORD)
    broker = Broker(broker_sasl, ("SCRAM-SHA-256", "SCRAM-SHA-512"))
    await _drive(handshake, broker)
    assert handshake.done
    assert broker.requests == [17, 36, 36]


async def test_wrong_password_is_an_upstream_auth_error_without_the_secret(
    broker_sasl: SaslServer,
) -> None:
    handshake = UpstreamHandshake("SCRAM-SHA-512", "kgw", "not-the-password")
    broker = Broker(broker_sasl, ("SCRAM-SHA-512",))
    with pytest.raises(UpstreamAuthError, match="sasl_authentication_failed") as raised:
        await _drive(handshake, broker)
    assert "not-the-password" not in str(raised.value)
    assert not handshake.done


async def test_a_mechanism_the_broker_does_not_offer(broker_sasl: SaslServer) -> None:
    handshake = UpstreamHandshake("SCRAM-SHA-512", "kgw", PASSWORD)
    with pytest.raises(UpstreamAuthError, match=r"does not offer SCRAM-SHA-512.*SCRAM-SHA-256"):
        await _drive(handshake, Broker(broker_sasl, ("SCRAM-SHA-256",)))


def test_plain_is_one_authenticate_round() -> None:
    handshake = UpstreamHandshake("PLAIN", "kgw", PASSWORD)
    first = handshake.start()
    offered = SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=("PLAIN",))
    auth = handshake.on_frame(encode_response(17, 1, 2_000_000_001, offered))
    assert auth is not None and b"\x00kgw\x00" + PASSWORD.encode() in auth
    assert first != auth
    assert handshake.on_frame(encode_response(36, 1, 2_000_000_002, _ok(b""))) is None
    assert handshake.done


def test_garbage_from_the_broker_is_an_upstream_auth_error() -> None:
    handshake = UpstreamHandshake("PLAIN", "kgw", PASSWORD)
    handshake.start()
    with pytest.raises(UpstreamAuthError, match="unreadable"):
        handshake.on_frame(struct.pack(">i", 6) + b"\x00\x00\x00\x01\xff\xff")


async def test_login_over_a_loopback_stream(broker_sasl: SaslServer, tmp_path: Path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    config = UpstreamSaslConfig(
        mechanism="SCRAM-SHA-256", username="kgw", password_file=password_file
    )
    identity = UpstreamIdentity.load(config)
    assert PASSWORD not in repr(identity)
    broker = Broker(broker_sasl, ("SCRAM-SHA-256",))

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                frame = size_bytes + await reader.readexactly(size)
                writer.write(await broker.answer(frame))
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.wait_for(identity.login(reader, writer), 10)
        writer.close()
        assert broker.requests == [17, 36, 36]
    finally:
        server.close()
        await server.wait_closed()


async def test_login_when_the_broker_hangs_up(tmp_path: Path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD)
    identity = UpstreamIdentity.load(
        UpstreamSaslConfig(mechanism="PLAIN", username="kgw", password_file=password_file)
    )

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with pytest.raises(UpstreamAuthError, match="closed the connection"):
            await asyncio.wait_for(identity.login(reader, writer), 10)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
