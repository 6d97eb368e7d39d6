"""The canary's I/O: sequenced records through a public listener, fetched back.

It is a Kafka client of the gateway like any tenant's: it bootstraps from the
listener's public address, logs in with the canary tenant's credentials
(``canary.sasl``) and talks to the gateway's per-broker ports, so every hop a
tenant's record takes (listener, authentication, authorization, quotas, the
upstream connection, the broker, replication) is on the canary's path. Each round
produces one record to every partition (one Produce per leader, acks=all) and
fetches from every partition (one Fetch per leader); outcomes go to ``CanaryBook``.

The canary topic is created through the gateway's own admin client when missing,
with one partition per registered broker, so leaders are spread over all brokers.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time

from kio.records.readers import read_batch
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from ..accesslog.topic import encode_batch
from ..upstream.client import BROKER_ERRORS, Address, BrokerClient, BrokerConnection, describe
from .canary import CanaryBook
from .settings import CanaryConfig

log = logging.getLogger("kgw.monitoring")
UNKNOWN_TOPIC = 3
TOPIC_EXISTS = 36
FETCH_MAX_BYTES = 1024 * 1024


class CanaryError(Exception):
    """The canary cannot run a round (no topic, no leader); the message says why."""


CANARY_ERRORS: tuple[type[Exception], ...] = (*BROKER_ERRORS, CanaryError)


class CanaryClient:
    """One canary: its connections to the gateway, positions, and the book it fills."""

    def __init__(
        self,
        public: BrokerClient,
        admin: BrokerClient,
        config: CanaryConfig,
        book: CanaryBook,
    ) -> None:
        self.public, self.admin, self.config, self.book = public, admin, config, book
        self.leaders: dict[int, Address] = {}
        self.positions: dict[int, int] = {}
        self._connections: dict[Address, BrokerConnection] = {}
        self._failing = False

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    async def round(self) -> bool:
        """One produce-and-fetch round over every partition; False if anything failed."""
        now = time.monotonic()
        self.book.expire(now)
        if not self.leaders:
            try:
                await self._refresh()
            except CANARY_ERRORS as exc:
                self.book.produce_failed(now)
                self.book.fetch_failed(now)
                self._report(False, describe(exc))
                return False
        by_leader: dict[Address, list[int]] = {}
        for partition, address in sorted(self.leaders.items()):
            by_leader.setdefault(address, []).append(partition)
        results = await asyncio.gather(
            *(self._leader_round(a, ps) for a, ps in by_leader.items()), return_exceptions=True
        )
        failed = False
        for result in results:
            if isinstance(result, BaseException):
                if not isinstance(result, CANARY_ERRORS):
                    raise result
                failed = True
            elif result:
                failed = True
        if failed:  # a leader moved or a broker went away: ask again next round
            self.leaders = {}
        self._report(not failed, "a produce or fetch failed")
        return not failed

    def _report(self, ok: bool, reason: str) -> None:
        """Log when the canary starts failing and when it recovers, not every round."""
        if ok and self._failing:
            log.info("canary recovered", extra={"event": "canary_recovered"})
        elif not ok and not self._failing:
            log.warning("canary failing", extra={"event": "canary_failed", "reason": reason})
        self._failing = not ok

    async def _leader_round(self, address: Address, partitions: list[int]) -> bool:
        """Produce, then fetch, on the one connection to this leader; True if any failed."""
        if any(p not in self.positions for p in partitions):
            try:  # positions first, or this round's own records would be skipped
                await self._init_positions(address, partitions)
            except CANARY_ERRORS:
                self._drop(address)
                return True
        produce_failed = await self._produce(address, partitions)
        fetch_failed = await self._fetch(address, partitions)
        return produce_failed or fetch_failed

    async def _connection(self, address: Address) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = await self.public.connect(address, timeout_s=self.config.timeout_s)
            self._connections[address] = connection
        return connection

    def _drop(self, address: Address) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

    async def _produce(self, address: Address, partitions: list[int]) -> bool:
        """Produce one record to each of ``partitions``; True if any failed."""
        sent_at = time.monotonic()
        sequences = {p: self.book.next_record(p) for p in partitions}
        request = ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.config.timeout_s)),
            topic_data=(
                TopicProduceData(
                    name=TopicName(self.config.topic),
                    partition_data=tuple(
                        PartitionProduceData(
                            index=i32(p), records=Records(encode_batch([sequences[p][1]]))
                        )
                        for p in partitions
                    ),
                ),
            ),
        )
        try:
            connection = await self._connection(address)
            response = await asyncio.wait_for(
                connection.request(request, ProduceResponse), self.config.timeout_s
            )
        except BROKER_ERRORS:
            self._drop(address)
            now = time.monotonic()
            for _ in partitions:
                self.book.produce_failed(now)
            return True
        now = time.monotonic()
        answered = {
            int(p.index): int(p.error_code)
            for t in response.responses
            for p in t.partition_responses
        }
        failed = False
        for partition in partitions:
            if answered.get(partition, -1) == 0:
                self.book.produced_ok(partition, sequences[partition][0], sent_at, now)
            else:
                self.book.produce_failed(now)
                failed = True
        return failed

    async def _fetch(self, address: Address, partitions: list[int]) -> bool:
        """Fetch what is new on ``partitions``; True if any failed."""
        if any(p not in self.positions for p in partitions):
            try:
                await self._init_positions(address, partitions)
            except CANARY_ERRORS:
                self._drop(address)
                now = time.monotonic()
                for _ in partitions:
                    self.book.fetch_failed(now)
                return True
        request = FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=200)),
            min_bytes=i32(1),
            max_bytes=i32(FETCH_MAX_BYTES),
            topics=(
                FetchTopic(
                    topic=TopicName(self.config.topic),
                    partitions=tuple(
                        FetchPartition(
                            partition=i32(p),
                            fetch_offset=i64(self.positions[p]),
                            partition_max_bytes=i32(FETCH_MAX_BYTES // max(1, len(partitions))),
                        )
                        for p in partitions
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        try:
            connection = await self._connection(address)
            response = await asyncio.wait_for(
                connection.request(request, FetchResponse), self.config.timeout_s
            )
        except BROKER_ERRORS:
            self._drop(address)
            now = time.monotonic()
            for _ in partitions:
                self.book.fetch_failed(now)
            return True
        now = time.monotonic()
        failed = False
        seen = set()
        for topic in response.responses:
            for answer in topic.partitions:
                partition = int(answer.partition_index)
                seen.add(partition)
                if answer.error_code:
                    self.book.fetch_failed(now)
                    failed = True
                    if int(answer.error_code) == 1:  # OFFSET_OUT_OF_RANGE: start again at the end
                        self.positions.pop(partition, None)
                    continue
                self.book.fetch_ok(now)
                self._take(partition, bytes(answer.records or b""), now)
        for partition in partitions:
            if partition not in seen:
                self.book.fetch_failed(now)
                failed = True
        return failed

    def _take(self, partition: int, data: bytes, now: float) -> None:
        offset = 0
        position = self.positions[partition]
        while offset + 12 <= len(data):
            length = int.from_bytes(data[offset + 8 : offset + 12], "big", signed=True)
            if offset + 12 + length > len(data):
                break  # a partial batch at the end
            try:
                batch, size = read_batch(data, offset)
            except ValueError:
                break
            offset += size
            for record in batch.records:
                if int(record.offset) < position:
                    continue
                self.book.received(record.value, now)
                position = int(record.offset) + 1
        self.positions[partition] = position

    async def _init_positions(self, address: Address, partitions: list[int]) -> None:
        request = ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(self.config.topic),
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(p), timestamp=i64(-1))
                        for p in partitions
                    ),
                ),
            ),
        )
        connection = await self._connection(address)
        response = await asyncio.wait_for(
            connection.request(request, ListOffsetsResponse), self.config.timeout_s
        )
        for topic in response.topics:
            for answer in topic.partitions:
                if answer.error_code:
                    raise CanaryError(f"ListOffsets: error code {int(answer.error_code)}")
                self.positions[int(answer.partition_index)] = int(answer.offset)

    async def _refresh(self) -> None:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(self.config.topic)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = await self.public.ask(request, MetadataResponse, self.config.timeout_s)
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        topic = next((t for t in response.topics if t.name == self.config.topic), None)
        if topic is None or topic.error_code == UNKNOWN_TOPIC:
            if self.config.create_topic:
                await self._create(len(brokers))
            raise CanaryError(f"canary topic {self.config.topic!r} does not exist (yet)")
        if topic.error_code:
            raise CanaryError(f"canary topic metadata: error code {int(topic.error_code)}")
        self.leaders = {
            int(p.partition_index): brokers[int(p.leader_id)]
            for p in topic.partitions
            if int(p.leader_id) in brokers
        }
        if len(self.leaders) < len(topic.partitions):
            raise CanaryError("a canary partition has no leader")

    async def _create(self, brokers: int) -> None:
        replicas = max(1, min(self.config.replication_factor, brokers))
        request = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=TopicName(self.config.topic),
                    num_partitions=i32(max(1, brokers)),
                    replication_factor=i16(replicas),
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.config.timeout_s)),
            validate_only=False,
        )
        response = await self.admin.ask(request, CreateTopicsResponse, self.config.timeout_s)
        code = int(response.topics[0].error_code) if response.topics else -1
        if code not in (0, TOPIC_EXISTS):
            raise CanaryError(f"creating the canary topic: error code {code}")
        log.info(
            "canary topic created",
            extra={"event": "canary_topic_created", "topic": self.config.topic, "count": brokers},
        )
