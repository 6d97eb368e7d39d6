"""Key manager calls never run on the event loop: through the real session and
connection core, a Produce that needs a DEK from a slow key manager is held (its
connection waits, ``RunWork``) while another tenant's unencrypted Produce on the same
gateway goes straight through; the call runs once (single flight) in the pool's
thread; a Fetch needing an unwrap is answered at once, without those records, and
the connection's next Fetch waits for the unwrap. Failures and a key manager that
does not answer end in a clear refusal, never in clear records."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import kio.schema.fetch.v12.request as fq12
import kio.schema.produce.v9.request as p9
import kio.schema.produce.v9.response as pr9
import pytest
from kio.schema.errors import ErrorCode

from gateway.addresses.topology import PublicMap, Topology
from gateway.config import ListenerConfig
from gateway.core import Connection, CoreServices
from gateway.core import commands as cmd
from gateway.core.events import Opened, RequestFrames, ResponseFrames, WorkDone
from gateway.encryption import EncryptionFilter
from gateway.encryption.batch import split
from gateway.filters.chain import FilterChain
from gateway.identity import ClientIdentity
from gateway.kms.api import KmsUnavailable, WrappedDek
from gateway.kms.filekms import FileKms
from gateway.protocol.codec import decode_response, encode_request, encode_response
from gateway.session import Session

from .test_filter import batch, fetch_v12

MARKER = b"MARKER-1"


class SlowKms(FileKms):
    """The development key manager, slowed down (an HSM far away), noting the threads
    it is called on. A test double for latency only: the keys are real."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(path)
        self.delay = delay
        self.threads: list[str] = []
        self.down = False

    def new_dek(self, kek: str) -> WrappedDek:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay)
        if self.down:
            raise KmsUnavailable("token unavailable")
        return super().new_dek(kek)

    def unwrap(self, kek: str, version: int, wrapped: bytes) -> bytes:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay)
        return super().unwrap(kek, version, wrapped)


def make(tmp_path: Path, delay: float, **dek: Any) -> tuple[EncryptionFilter, SlowKms]:
    kms = SlowKms(tmp_path / "keks.json", delay)
    kms.create("acme")
    config = {
        "kms": {"backend": "file", "file": {"path": str(kms.path)},
                "allow_development_backend": True},
        "dek": dek,
        "policies": [{"tenant": "acme", "prefixes": ["enc."]}],
    }  # fmt: skip
    return EncryptionFilter(config, kms=kms), kms


def connection(item: EncryptionFilter, tenant: str) -> Connection:
    identity = ClientIdentity("public", "10.0.0.9", 5555, f"User:{tenant}-app", tenant=tenant)
    listener = ListenerConfig(
        name="public", bootstrap_port=19092, broker_port_base=19100, advertised_host="gw.example"
    )
    chain = FilterChain([item]).bind(identity)
    session = Session(PublicMap(listener, Topology()), identity, None, None, filters=chain)
    core = Connection(session, CoreServices())
    core.handle(Opened("10.0.0.9"))
    return core


def produce(topic: str, correlation_id: int) -> bytes:
    data = p9.TopicProduceData(
        name=topic, partition_data=(p9.PartitionProduceData(index=0, records=batch()),)
    )
    body = p9.ProduceRequest(acks=-1, timeout=dt.timedelta(seconds=5), topic_data=(data,))
    return encode_request(0, 9, correlation_id, "app", body)


def fetch(correlation_id: int) -> bytes:
    part = fq12.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20,
    )  # fmt: skip
    body = fq12.FetchRequest(
        replica_id=-1, max_wait=dt.timedelta(milliseconds=10), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(fq12.FetchTopic(topic="enc.t", partitions=(part,)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    return encode_request(1, 12, correlation_id, "app", body)


def forwarded(commands: list[cmd.Command]) -> list[bytes]:
    return [data for c in commands if isinstance(c, cmd.Forward) for data in c.frames]


def work_of(commands: list[cmd.Command]) -> cmd.RunWork | None:
    return next((c for c in commands if isinstance(c, cmd.RunWork)), None)


async def run_work(work: cmd.RunWork) -> WorkDone:
    return WorkDone(await work.work.run())


def test_a_slow_kms_holds_only_its_connection_never_another_tenants(tmp_path: Path) -> None:
    item, kms = make(tmp_path, delay=1.0)
    acme = [connection(item, "acme") for _ in range(5)]
    other = connection(item, "other")
    started = time.monotonic()
    works = []
    for index, core in enumerate(acme):
        commands = core.handle(RequestFrames([produce("enc.t", 10 + index)]))
        assert forwarded(commands) == []  # held: its DEK is being made
        works.append(work_of(commands))
        assert works[-1] is not None and core.state.value == "working"
    commands = other.handle(RequestFrames([produce("plain.t", 1)]))
    assert len(forwarded(commands)) == 1 and MARKER in forwarded(commands)[0]
    assert time.monotonic() - started < 0.5  # nobody waited for the 1 s key manager call

    async def finish() -> list[list[cmd.Command]]:
        done = await asyncio.gather(*(run_work(w) for w in works if w is not None))
        return [core.handle(event) for core, event in zip(acme, done, strict=True)]

    for commands in asyncio.run(finish()):
        (sealed,) = forwarded(commands)
        assert MARKER not in sealed and b"KGE" in sealed
    assert kms.threads == ["kgw-kms_0"]  # one call for five connections, off the loop
    assert all(core.state.value == "open" for core in acme)


def test_a_fetch_needing_an_unwrap_is_answered_at_once_and_the_next_fetch_waits(
    tmp_path: Path,
) -> None:
    writer, _ = make(tmp_path, delay=0.0)
    sealed = _sealed(writer)
    item, kms = make_reader(tmp_path, delay=0.5)
    core = connection(item, "acme")
    assert len(forwarded(core.handle(RequestFrames([fetch(1)])))) == 1
    answer = encode_response(1, 12, 1, fetch_v12("enc.t", sealed))
    commands = core.handle(ResponseFrames([answer]))
    (reply,) = [f for c in commands if isinstance(c, cmd.Reply) for f in c.frames]
    part = decode_response(memoryview(reply)[4:], 1, 12).responses[0].partitions[0]
    assert part.error_code == ErrorCode.none and not part.records  # no ciphertext, no wait
    commands = core.handle(RequestFrames([fetch(2)]))
    work = work_of(commands)
    assert work is not None and forwarded(commands) == []  # the next Fetch waits
    done = asyncio.run(run_work(work))
    assert len(forwarded(core.handle(done))) == 1
    commands = core.handle(ResponseFrames([encode_response(1, 12, 2, fetch_v12("enc.t", sealed))]))
    (reply,) = [f for c in commands if isinstance(c, cmd.Reply) for f in c.frames]
    part = decode_response(memoryview(reply)[4:], 1, 12).responses[0].partitions[0]
    assert MARKER in bytes(part.records) and kms.threads == ["kgw-kms_0"]


def test_kms_down_the_held_produce_is_refused_and_waiters_share_the_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    item, kms = make(tmp_path, delay=0.2)
    kms.down = True
    cores = [connection(item, "acme") for _ in range(3)]
    works = [work_of(c.handle(RequestFrames([produce("enc.t", 5)]))) for c in cores]

    async def finish() -> list[list[cmd.Command]]:
        done = await asyncio.gather(*(run_work(w) for w in works if w is not None))
        return [core.handle(event) for core, event in zip(cores, done, strict=True)]

    for commands in asyncio.run(finish()):
        assert forwarded(commands) == []  # never in clear
        (reply,) = [f for c in commands if isinstance(c, cmd.Reply) for f in c.frames]
        answer = decode_response(memoryview(reply)[4:], 0, 9, pr9.ProduceResponse)
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.invalid_record
    refusals = [r.getMessage() for r in caplog.records if "produce refused" in r.getMessage()]
    assert len(refusals) == 3 and all("token unavailable" in r for r in refusals)
    assert len(kms.threads) == 1  # the failure is shared, the HSM asked once


def test_a_kms_that_does_not_answer_in_time_is_a_refusal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    item, _kms = make(tmp_path, delay=1.5, kms_timeout_seconds=0.3)
    core = connection(item, "acme")
    work = work_of(core.handle(RequestFrames([produce("enc.t", 5)])))
    assert work is not None
    commands = core.handle(asyncio.run(run_work(work)))
    if work_of(commands) is not None:  # woke before the deadline: once more
        commands = core.handle(asyncio.run(run_work(work_of(commands))))  # type: ignore[arg-type]
    assert forwarded(commands) == []
    (reply,) = [f for c in commands if isinstance(c, cmd.Reply) for f in c.frames]
    part = decode_response(memoryview(reply)[4:], 0, 9).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record
    assert any("did not answer within 0.3s" in r.getMessage() for r in caplog.records)


def make_reader(tmp_path: Path, delay: float) -> tuple[EncryptionFilter, SlowKms]:
    """A second filter on the same key file (a fresh gateway: nothing cached)."""
    kms = SlowKms(tmp_path / "keks.json", delay)
    config = {
        "kms": {"backend": "file", "file": {"path": str(kms.path)},
                "allow_development_backend": True},
        "policies": [{"tenant": "acme", "prefixes": ["enc."]}],
    }  # fmt: skip
    return EncryptionFilter(config, kms=kms), kms


def _sealed(writer: EncryptionFilter) -> bytes:
    from .test_filter import produce_v9, run_request

    call = run_request(writer, produce_v9("enc.t", batch()))
    records = call.body.topic_data[0].partition_data[0].records
    assert len(split(records)) == 1 and MARKER not in records
    return bytes(records)
