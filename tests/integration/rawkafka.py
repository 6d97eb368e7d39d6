"""A tiny Kafka client built on the gateway's own kio codec, for protocol-level tests."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, TypeVar

from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.types import TopicName
from kio.static.protocol import Entity

from gateway.protocol.codec import decode_response, encode_request

E = TypeVar("E")


class RawConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._correlation = 0

    @classmethod
    async def open(cls, address: str) -> RawConnection:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
        return cls(reader, writer)

    @classmethod
    async def open_plain(cls, address: str, username: str, password: str) -> RawConnection:
        """A connection authenticated with SASL PLAIN (an API key and its secret)."""
        connection = await cls.open(address)
        try:
            await connection.authenticate_plain(username, password)
        except BaseException:
            connection.close()
            raise
        return connection

    async def authenticate_plain(self, username: str, password: str) -> None:
        handshake = await self.request(
            SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
        )
        assert handshake.error_code == 0, handshake
        token = b"\0" + username.encode() + b"\0" + password.encode()
        auth = await self.request(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        assert auth.error_code == 0, auth.error_message

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """The peer's advertised APIs: key -> (lowest, highest) version."""
        answer = await self.request(
            ApiVersionsRequest(client_software_name="rawkafka", client_software_version="1"),
            ApiVersionsResponse,
        )
        assert answer.error_code == 0, answer
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}

    async def call(self, body: Entity, timeout_s: float = 15) -> tuple[Any, bytes]:
        """Send any kio request; its decoded response (kio's own schema) and raw frame."""
        await self.send(body)
        payload = await self.read_frame(timeout_s)
        key, version = int(body.__api_key__), int(body.__version__)  # type: ignore[attr-defined]
        decoded: Any = decode_response(payload, key, version, load_response_schema(key, version))
        return decoded, payload

    async def request(self, body: Entity, response_type: type[E], timeout_s: float = 15) -> E:
        await self.send(body)
        return await self.receive(body, response_type, timeout_s)

    async def send(self, body: Entity) -> int:
        self._correlation += 1
        key = int(body.__api_key__)  # type: ignore[attr-defined]
        self.writer.write(encode_request(key, int(body.__version__), self._correlation, "t", body))
        await self.writer.drain()
        return self._correlation

    async def receive(self, body: Entity, response_type: type[E], timeout_s: float = 15) -> E:
        payload = await self.read_frame(timeout_s)
        key = int(body.__api_key__)  # type: ignore[attr-defined]
        result: Any = decode_response(payload, key, int(body.__version__), response_type)
        return result  # type: ignore[no-any-return]

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout_s: float = 15) -> bytes:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout_s))
        return await asyncio.wait_for(self.reader.readexactly(size), timeout_s)

    async def closed_by_peer(self, timeout_s: float = 10) -> bool:
        """True once the peer has closed (EOF or reset) within ``timeout``."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout_s)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""

    def close(self) -> None:
        self.writer.close()


async def known_everywhere(brokers: list[tuple[str, int]], topic: str) -> None:
    """Wait until every broker's metadata has the new topic with a leader for each
    partition: CreateTopics returns once the controller has it, brokers learn it later."""
    deadline = time.monotonic() + 30
    for host, port in brokers:
        connection = await RawConnection.open(f"{host}:{port}")
        try:
            while True:
                request = MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
                answer = await connection.request(request, MetadataResponse)
                found = [t for t in answer.topics if t.name == topic]
                if (
                    found
                    and found[0].error_code == 0
                    and found[0].partitions
                    and all(p.leader_id >= 0 for p in found[0].partitions)
                ):
                    break
                assert time.monotonic() < deadline, f"{host}:{port} never learnt {topic}"
                await asyncio.sleep(0.2)
        finally:
            connection.close()
