"""The gateway's hot paths in-process (issue 16 part 3): CPU seconds per GB, no Kafka.

``python -m bench.hotpath [--profile] [--repeat N]`` replays synthetic traffic
through the real code, timed with the process CPU clock (best of ``--repeat``), so
an A/B of a change holds up on a busy machine far better than a benchmark of whole
processes:

- ``session``: one connection's ``Session`` with nothing enabled (the plain gateway)
  and with the full stack's per-request work: authorization with ``bench.authz``'s
  policy (540 tenants, ~10,260 lines), quotas charged on every request (the engine
  without Redis: local buckets), the access log (records built and encoded to a
  file) and the per-request metrics (since 27 Nov 23:08 UTC). Produce v12 with two
  3 KB batches (~6 KB, what a producer sends on this machine's few MB/s) and its
  answer; Fetch v12 answered with 2 x 1 MiB of batches.
  SASL's per-request check and the event loop are not in it.
- ``tls``: ``TlsServerProtocol`` against a real OpenSSL client over memory BIOs:
  32 KB requests arriving in 256 KiB reads; 2 MiB responses written; and per request,
  a 6 KB request read on its own and a 120 B answer written.

Prints CPU-s/GB (and µs per request for the small TLS case). ``--profile`` adds
cProfile's top functions of the full-stack Produce path.

``--cold`` adds the session's CPU µs per Produce exchange twice: *hot* (right after
another exchange, as in the loops above) and *cold* (after every cache level was
evicted by hashing ``EVICT_BYTES``, more than this machine's 32 MiB L3), for the plain
and the full-stack session. In the gateway itself, requests arrive between other
connections' work, the brokers' and the load tools' on the same two cores, so each
one runs somewhere between the two: the hot loops alone understate what a feature
costs there (``docs/performance-issue16.md``, "hot and cold").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import functools
import hashlib
import os
import pstats
import shutil
import ssl
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/hotpath.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_rq
from kio.schema.fetch.v12 import response as fetch_rs
from kio.schema.produce.v12 import request as produce_rq
from kio.schema.produce.v12 import response as produce_rs
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from bench import authz
from gateway.accesslog.files import FileSink
from gateway.accesslog.writer import AccessLog
from gateway.addresses.topology import PublicMap, Topology
from gateway.authz.engine import Authorizer
from gateway.authz.store import PolicyStore
from gateway.config import ListenerConfig
from gateway.enforcement import Enforcer
from gateway.identity import ClientIdentity
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.observer import ConnectionObserver
from gateway.protocol.codec import encode_request, encode_response
from gateway.protocol.framing import FrameReader
from gateway.quotas.engine import QuotaEngine
from gateway.quotas.settings import QuotaConfig
from gateway.quotas.store import FileQuotaStore
from gateway.quotas.throttle import Throttle
from gateway.session import Session
from gateway.tls.accept import TlsServerProtocol
from gateway.tls.ca import CertificateAuthority, parse_san, parse_subject
from gateway.tls.layer import on_sni

REPO = Path(__file__).resolve().parent.parent
TOPIC = "t0000.bench-produce-full-scram-1"
GB = 1e9
EVICT_BYTES = 48 << 20  # hashing this evicts L1, L2 and the 32 MiB L3 of this VM


# -- frames -----------------------------------------------------------------------------


def batch(size: int, records: int) -> bytes:
    """A v2 record batch header with ``records`` and ``size`` bytes in all."""
    body = bytearray(size)
    struct.pack_into(">qi", body, 0, 0, size - 12)
    body[16] = 2
    struct.pack_into(">i", body, 57, records)
    body[61:] = os.urandom(size - 61)
    return bytes(body)


def ms(milliseconds: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=milliseconds))


def produce_pair(cid: int, partitions: int = 2, size: int = 3000) -> tuple[bytes, bytes]:
    request = produce_rq.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=ms(30_000),
        topic_data=(produce_rq.TopicProduceData(name=TopicName(TOPIC), partition_data=tuple(
            produce_rq.PartitionProduceData(index=i32(p), records=Records(batch(size, 15)))
            for p in range(partitions))),),
    )  # fmt: skip
    response = produce_rs.ProduceResponse(
        responses=(produce_rs.TopicProduceResponse(name=TopicName(TOPIC), partition_responses=tuple(
            produce_rs.PartitionProduceResponse(index=i32(p), error_code=ErrorCode.none,
                                                base_offset=i64(100), record_errors=())
            for p in range(partitions))),),
        throttle_time=ms(0), node_endpoints=(),
    )  # fmt: skip
    return (
        encode_request(0, 12, cid, "producer-1", request),
        encode_response(0, 12, cid, response),
    )


def fetch_pair(cid: int, partitions: int = 2, per_partition: int = 1 << 20) -> tuple[bytes, bytes]:
    request = fetch_rq.FetchRequest(
        cluster_id=None, replica_id=BrokerId(-1), max_wait=ms(500),
        min_bytes=i32(1), max_bytes=i32(50 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
        topics=(fetch_rq.FetchTopic(topic=TopicName(TOPIC), partitions=tuple(
            fetch_rq.FetchPartition(partition=i32(p), current_leader_epoch=i32(0),
                                    fetch_offset=i64(0), last_fetched_epoch=i32(-1),
                                    log_start_offset=i64(-1),
                                    partition_max_bytes=i32(per_partition))
            for p in range(partitions))),),
    )  # fmt: skip
    records = Records(b"".join(batch(16384, 15) for _ in range(per_partition // 16384)))
    response = fetch_rs.FetchResponse(
        throttle_time=ms(0), error_code=ErrorCode.none, session_id=i32(0),
        responses=(fetch_rs.FetchableTopicResponse(topic=TopicName(TOPIC), partitions=tuple(
            fetch_rs.PartitionData(
                partition_index=i32(p), error_code=ErrorCode.none, high_watermark=i64(10**6),
                last_stable_offset=i64(10**6), log_start_offset=i64(0),
                diverging_epoch=fetch_rs.EpochEndOffset(epoch=i32(-1), end_offset=i64(-1)),
                current_leader=fetch_rs.LeaderIdAndEpoch(leader_id=BrokerId(-1),
                                                         leader_epoch=i32(-1)),
                snapshot_id=fetch_rs.SnapshotId(end_offset=i64(-1), epoch=i32(-1)),
                aborted_transactions=None, preferred_read_replica=BrokerId(-1), records=records)
            for p in range(partitions))),),
    )  # fmt: skip
    return (
        encode_request(1, 12, cid, "consumer-1", request),
        encode_response(1, 12, cid, response),
    )


# -- the session ------------------------------------------------------------------------


class SessionRig:
    """A ``Session`` as ``runtime/sessions.py`` builds it, and the access log behind it."""

    def __init__(self, full: bool, workdir: Path) -> None:
        listener = ListenerConfig(name="public", bootstrap_port=19092, broker_port_base=19100,
                                  advertised_host="127.0.0.1")  # fmt: skip
        identity = ClientIdentity(listener="public", host="127.0.0.1", port=5000,
                                  principal=authz.PRINCIPAL)  # fmt: skip
        mapping = PublicMap(listener, Topology())
        self.observer: ConnectionObserver | None = None
        self.log: AccessLog | None = None
        self.sink: FileSink | None = None
        if not full:
            self.session = Session(mapping, identity)
            return
        policies = workdir / "policies"
        policies.mkdir()
        shutil.copy(REPO / "policies" / "model.conf", policies / "model.conf")
        (policies / "policy.csv").write_text("\n".join(authz.policy_lines(540)) + "\n")
        enforcer = Enforcer(Authorizer(PolicyStore(policies, super_users=[])), identity)
        store_file = workdir / "quotas.json"
        from bench.quotas import _grant  # far above what is reached: nothing throttles

        _grant(FileQuotaStore(store_file))
        throttle = Throttle(QuotaEngine.from_config(QuotaConfig(store_file=store_file)), identity)
        self.sink = FileSink(workdir / "access.log", 1 << 30, 2)
        self.log = AccessLog([self.sink], 100_000)
        self.observer = ConnectionObserver(self.log, GatewayMetrics(), "bench", "c1", identity)
        self.session = Session(mapping, identity, enforcer, observe=True, throttle=throttle,
                               bind_fetch_sessions=True)  # fmt: skip

    def exchange(self, request: bytes, response: bytes, index: int) -> None:
        session = self.session
        if session.on_request(request) is None:
            raise RuntimeError("the request was not forwarded")
        session.on_response(response)
        if len(session.take_ready()) != 1:
            raise RuntimeError("no answer")
        if self.observer is not None:
            for exchange in session.take_finished():
                self.observer.exchange(exchange)
            if index % 256 == 255:
                self.flush()

    def flush(self) -> None:
        """What the writer task does, inline: encode and write the queued records."""
        if self.log is None or self.sink is None:
            return
        queue = self.log._channels[0].queue
        self.sink._write(list(queue))
        queue.clear()


def session_cpu(kind: str, full: bool, count: int, profile: bool = False) -> float:
    workdir = Path(tempfile.mkdtemp(prefix="kgw-hotpath-"))
    try:
        rig = SessionRig(full, workdir)
        make = produce_pair if kind == "produce" else fetch_pair
        pairs = [make(1), make(2)]
        moved = 0
        profiler = cProfile.Profile(time.process_time) if profile else None
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        for index in range(count):
            request, response = pairs[index % 2]
            rig.exchange(request, response, index)
            moved += len(request) if kind == "produce" else len(response)
        rig.flush()
        cpu = time.process_time() - start
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(30)
        return cpu / (moved / GB)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def session_cold_us(full: bool, count: int) -> tuple[float, float]:
    """CPU µs per Produce exchange through the session: ``(hot, cold)``. Hot: the mean
    of ``count`` exchanges back to back; cold: of ``count`` exchanges each run after
    the caches were evicted. Both include the writer's share: encoding the access-log
    records (building them, where they are queued unbuilt), timed every 64 exchanges."""
    workdir = Path(tempfile.mkdtemp(prefix="kgw-hotpath-"))
    try:
        rig = SessionRig(full, workdir)
        pairs = [produce_pair(1), produce_pair(2)]
        for index in range(256):  # first-time costs (caches of the policy, the quotas)
            rig.exchange(*pairs[index % 2], index)
        rig.flush()
        start = time.process_time()
        for index in range(count):  # index 0: no flush inline; here every 64 as below
            rig.exchange(*pairs[index % 2], 0)
            if index % 64 == 63:
                rig.flush()
        rig.flush()
        hot = time.process_time() - start
        evict = bytes(EVICT_BYTES)
        cold = 0.0
        for index in range(count):
            hashlib.blake2b(evict).digest()
            start = time.process_time()
            rig.exchange(*pairs[index % 2], 0)
            if index % 64 == 63:
                rig.flush()
            cold += time.process_time() - start
        start = time.process_time()
        rig.flush()
        cold += time.process_time() - start
        return hot / count * 1e6, cold / count * 1e6
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- TLS --------------------------------------------------------------------------------


class _Raw:
    """The socket transport, counting (or keeping, during the handshake) what is written."""

    def __init__(self) -> None:
        self.written = 0
        self.kept: list[bytes] | None = []

    def write(self, data: bytes) -> None:
        self.written += len(data)
        if self.kept is not None:
            self.kept.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def close(self) -> None: ...
    def abort(self) -> None: ...


class _Inner:
    """The plaintext side, cutting frames as ``ClientConnection`` does."""

    conn_id = "c1"
    node_id = None

    def __init__(self) -> None:
        self.identity = ClientIdentity(listener="tls", host="", port=0)
        self.reader = FrameReader(256 << 20)
        self.received = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes | memoryview) -> None:
        for item in self.reader.feed(data):
            self.received += len(item)

    def tls_done(self, reason: str | None) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...


class _Material:
    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.generation = 0


class _Acceptor:
    """What ``TlsServerProtocol`` asks of its listener (server authentication only)."""

    listener = "tls"
    sni = None

    class config:  # mirrors the attribute of ``TlsAcceptor``
        handshake_timeout_s = 30.0

    def __init__(self, context: ssl.SSLContext) -> None:
        self.material = _Material(context)

    def sni_allowed(self, _name: str | None) -> bool:
        return True

    def principal(self, _established: Any) -> str | None:
        return None


class TlsRig:
    def __init__(self, pki: Path) -> None:
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.minimum_version = ssl.TLSVersion.TLSv1_3
        server.load_cert_chain(pki / "issued" / "gw.pem", pki / "issued" / "gw.key")
        server.sni_callback = on_sni
        self.loop = asyncio.new_event_loop()
        self.inner = _Inner()
        self.raw = _Raw()
        self.protocol = TlsServerProtocol(_Acceptor(server), self.inner)  # type: ignore[arg-type]

        async def made() -> None:  # the handshake timer wants a running loop
            self.protocol.connection_made(self.raw)  # type: ignore[arg-type]

        self.loop.run_until_complete(made())
        client = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        self.cin, self.cout = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = client.wrap_bio(self.cin, self.cout, server_hostname="localhost")
        for _ in range(10):
            with contextlib.suppress(ssl.SSLWantReadError):
                self.client.do_handshake()
            self.protocol.data_received(self.cout.read())
            for chunk in self.raw.kept or []:
                self.cin.write(chunk)
            self.raw.kept = []
            if self.protocol.app is not None:
                break
        if self.protocol.app is None:
            raise RuntimeError("TLS handshake did not complete")
        self.raw.kept = None

    def close(self) -> None:
        self.loop.close()


def make_pki(root: Path) -> Path:
    ca = CertificateAuthority.create(root / "ca", parse_subject("CN=Hotpath CA"))
    ca.issue("gw", "server", parse_subject("CN=gw"), [parse_san("localhost")])
    return root / "ca"


def tls_produce(pki: Path, total: int = 128 << 20, size: int = 32 << 10) -> float:
    rig = TlsRig(pki)
    item = struct.pack(">i", size - 4) + os.urandom(size - 4)
    for _ in range(total // size):  # the client's encryption is not timed
        rig.client.write(item)
    ciphertext = rig.cout.read()
    reads = [ciphertext[i : i + (256 << 10)] for i in range(0, len(ciphertext), 256 << 10)]
    del ciphertext
    start = time.process_time()
    for chunk in reads:
        rig.protocol.data_received(chunk)
    cpu = time.process_time() - start
    rig.close()
    return cpu / (rig.inner.received / GB)


def tls_consume(pki: Path, total: int = 256 << 20, size: int = 2 << 20) -> float:
    rig = TlsRig(pki)
    item = struct.pack(">i", size - 4) + os.urandom(size - 4)
    app = rig.protocol.app
    assert app is not None
    start = time.process_time()
    for _ in range(total // size):
        app.writelines([item])
    cpu = time.process_time() - start
    rig.close()
    return cpu / ((total // size) * size / GB)


def tls_small(pki: Path, count: int = 20_000, size: int = 6000) -> float:
    """µs per request: a 6 KB request read on its own and a 120 B answer written."""
    rig = TlsRig(pki)
    item = struct.pack(">i", size - 4) + os.urandom(size - 4)
    reads = []
    for _ in range(count):
        rig.client.write(item)
        reads.append(rig.cout.read())
    answer = struct.pack(">i", 116) + os.urandom(116)
    app = rig.protocol.app
    assert app is not None
    start = time.process_time()
    for chunk in reads:
        rig.protocol.data_received(chunk)
        app.writelines([answer])
    cpu = time.process_time() - start
    rig.close()
    return cpu / count * 1e6


def framing_only(total: int = 128 << 20, size: int = 32 << 10) -> float:
    inner = _Inner()
    item = struct.pack(">i", size - 4) + os.urandom(size - 4)
    data = item * (total // size)
    reads = [data[i : i + (256 << 10)] for i in range(0, len(data), 256 << 10)]
    start = time.process_time()
    for chunk in reads:
        inner.data_received(chunk)
    return (time.process_time() - start) / (inner.received / GB)


def best(repeat: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath", description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    parser.add_argument("--profile", action="store_true", help="profile the full Produce path")
    parser.add_argument(
        "--cold", type=int, default=0, metavar="N",
        help="also CPU µs per Produce exchange, hot and cold, N each (200: ~25 s)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)  # the gateway's own lines are not what is measured
    rows: list[tuple[str, float, str]] = []
    for kind, count in (("produce", 6000), ("fetch", 200)):
        for full in (False, True):
            label = f"session {kind}, {'full stack' if full else 'plain'}"
            run: Callable[[], float] = functools.partial(session_cpu, kind, full, count)
            rows.append((label, best(opts.repeat, run), "CPU-s/GB"))
    with tempfile.TemporaryDirectory(prefix="kgw-hotpath-pki-") as tmp:
        pki = make_pki(Path(tmp))
        rows.append(("framing only, 32 KB requests", best(opts.repeat, framing_only), "CPU-s/GB"))
        rows.append(("TLS in, 32 KB requests", best(opts.repeat, lambda: tls_produce(pki)),
                     "CPU-s/GB"))  # fmt: skip
        rows.append(("TLS out, 2 MiB responses", best(opts.repeat, lambda: tls_consume(pki)),
                     "CPU-s/GB"))  # fmt: skip
        rows.append(("TLS per small request", best(opts.repeat, lambda: tls_small(pki)), "µs"))
    if opts.cold:
        (plain_hot, plain_cold), (full_hot, full_cold) = (
            session_cold_us(full, opts.cold) for full in (False, True)
        )
        rows += [
            ("session produce, plain, hot", plain_hot, "µs"),
            ("session produce, plain, cold", plain_cold, "µs"),
            ("session produce, full stack, hot", full_hot, "µs"),
            ("session produce, full stack, cold", full_cold, "µs"),
            ("full stack adds, hot", full_hot - plain_hot, "µs"),
            ("full stack adds, cold", full_cold - plain_cold, "µs"),
        ]
    for label, value, unit in rows:
        print(f"{label:<36} {value:8.3f} {unit}")
    if opts.profile:
        session_cpu("produce", True, 6000, profile=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
