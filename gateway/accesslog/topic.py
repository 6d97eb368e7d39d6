"""The optional sink: every record also produced to a topic on the backend cluster.

Records are JSON values without keys, one v2 record batch (built by kio, CRC32C
included) per Produce v9 request, each batch to the next partition in turn.
The sink keeps one connection to that partition's leader, found with a Metadata
request through the configured bootstrap servers. Both go through the gateway's
``BrokerClient`` (``gateway.upstream.client``): the upstream TLS settings and, with
``upstream.sasl``, the gateway's own SASL login, like all its broker traffic. The
topic must exist (the gateway never creates it).

A failed request (network error, timeout, a refused login, a partition error
such as NOT_LEADER_OR_FOLLOWER) refreshes the metadata and is retried once; after that
the batch fails with ``SinkError`` and the writer counts it (or, in ``block``
mode, retries it later).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import itertools
from concurrent.futures import ThreadPoolExecutor

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import Records, TZAwareMicros, i8, i16, i32, i32Timedelta, i64

from ..upstream.client import (
    BROKER_ERRORS,
    Address,
    BrokerClient,
    BrokerConnection,
    BrokerUnavailable,
    describe,
)
from .counting import first_error_code
from .files import encode_line
from .pending import Queued
from .sink import Drops, SinkError

BATCH_OVERHEAD = 61 + 64  # batch header, and a margin for the request around it


def encode_batch(lines: list[bytes], now: datetime.datetime | None = None) -> bytes:
    """One uncompressed v2 record batch of ``lines`` as values (no keys, no headers)."""
    stamp = TZAwareMicros.parse(now or datetime.datetime.now(datetime.UTC))
    records = tuple(
        Record(attributes=i8(0), timestamp=stamp, offset=i64(i), key=None, value=line, headers=())
        for i, line in enumerate(lines)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        records=records,
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def split_lines(lines: list[bytes], max_bytes: int) -> tuple[list[list[bytes]], int]:
    """Lines grouped into batches of at most ``max_bytes``; and how many were too large."""
    groups: list[list[bytes]] = []
    current: list[bytes] = []
    size = BATCH_OVERHEAD
    too_large = 0
    for line in lines:
        cost = len(line) + 12  # record length, attributes, deltas, key and value lengths
        if cost + BATCH_OVERHEAD > max_bytes:
            too_large += 1
            continue
        if current and size + cost > max_bytes:
            groups.append(current)
            current, size = [], BATCH_OVERHEAD
        current.append(line)
        size += cost
    if current:
        groups.append(current)
    return groups, too_large


class TopicSink:
    """Produces batches of records to ``topic`` (acks per the configuration)."""

    name = "topic"

    def __init__(
        self,
        topic: str,
        client: BrokerClient,
        acks: int = -1,
        timeout_s: float = 10.0,
        batch_max_bytes: int = 512 * 1024,
    ) -> None:
        self.topic = topic
        self.client = client
        self.acks = acks
        self.timeout_s = timeout_s
        self.batch_max_bytes = batch_max_bytes
        self._leaders: dict[int, Address] = {}
        self._partitions = itertools.cycle([0])
        self._connection: BrokerConnection | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgw-accesslog-topic")

    # -- the Sink protocol ------------------------------------------------------------

    async def write(self, entries: list[Queued]) -> Drops:
        loop = asyncio.get_running_loop()
        groups, too_large = await loop.run_in_executor(self._thread, self._prepare, entries)
        done = too_large  # counted first: the writer only needs the total done
        for lines, batch in groups:
            try:
                await self._produce_with_retry(batch)
            except SinkError as exc:
                raise SinkError(exc.reason, done) from None
            done += len(lines)
        return {"too_large": too_large} if too_large else {}

    async def close(self) -> None:
        self._disconnect()
        self._thread.shutdown(wait=False, cancel_futures=True)

    # -- producing ----------------------------------------------------------------------

    def _prepare(self, entries: list[Queued]) -> tuple[list[tuple[list[bytes], bytes]], int]:
        lines = [encode_line(entry)[:-1] for entry in entries]
        groups, too_large = split_lines(lines, self.batch_max_bytes)
        return [(group, encode_batch(group)) for group in groups], too_large

    async def _produce_with_retry(self, batch: bytes) -> None:
        try:
            await self._produce(batch)
        except SinkError:
            self._leaders.clear()
            self._disconnect()
            await self._produce(batch)

    async def _produce(self, batch: bytes) -> None:
        if not self._leaders:
            await self._refresh()
        partition = next(self._partitions)
        leader = self._leaders.get(partition)
        if leader is None:
            raise SinkError(f"topic {self.topic!r} partition {partition} has no leader")
        request = ProduceRequest(
            transactional_id=None,
            acks=i16(self.acks),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout_s)),
            topic_data=(
                TopicProduceData(
                    name=TopicName(self.topic),
                    partition_data=(
                        PartitionProduceData(index=i32(partition), records=Records(batch)),
                    ),
                ),
            ),
        )
        try:
            response = await asyncio.wait_for(self._send(leader, request), self.timeout_s)
        except BROKER_ERRORS as exc:
            self._disconnect()
            raise SinkError(f"produce to {leader[0]}:{leader[1]} failed: {describe(exc)}") from None
        code = first_error_code(response)
        if code:
            raise SinkError(f"produce to {self.topic!r} partition {partition}: error code {code}")

    async def _send(self, leader: Address, request: ProduceRequest) -> ProduceResponse:
        connection = self._connection
        if connection is None or connection.address != leader:
            self._disconnect()  # a new one: TLS and, with upstream.sasl, the gateway's login
            connection = await self.client.connect(leader, timeout_s=self.timeout_s)
            self._connection = connection
        return await connection.request(request, ProduceResponse)

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _refresh(self) -> None:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(self.topic)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        try:
            response = await self.client.ask(request, MetadataResponse, self.timeout_s)
        except BrokerUnavailable as exc:
            reason = f"metadata for topic {self.topic!r} unavailable ({exc.reason})"
            raise SinkError(reason) from None
        self._learn(response)

    def _learn(self, response: MetadataResponse) -> None:
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        topic = next((t for t in response.topics if t.name == self.topic), None)
        if topic is None or topic.error_code:
            code = int(topic.error_code) if topic is not None else -1
            raise SinkError(f"topic {self.topic!r} unavailable (error code {code})")
        leaders = {
            int(p.partition_index): brokers[int(p.leader_id)]
            for p in topic.partitions
            if int(p.leader_id) in brokers
        }
        if not leaders:
            raise SinkError(f"topic {self.topic!r} has no partition with a leader")
        self._leaders = leaders
        self._partitions = itertools.cycle(sorted(leaders))
