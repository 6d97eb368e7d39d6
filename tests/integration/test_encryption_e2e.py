"""Record encryption end to end: a real gateway with the encryption filter, KEKs in a
real SoftHSM2 token (initialised here, PIN generated here), the real 3-node cluster,
and unmodified clients.

What clients produce through the gateway comes back exactly (keys, values, headers,
timestamps, offsets) for every compression codec; the brokers' log segments hold none
of the plaintext and a direct consumer gets envelopes; transactions work; KEK rotation,
disabling and destruction (crypto-shredding, through ``kgw keys``) behave as documented,
and another KEK's topics are unaffected.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack.gateway_proc import GatewayProcess
from gateway.devstack.kafka_cluster import KafkaCluster
from gateway.devstack.softhsm import SoftHsm
from gateway.kms.pkcs11 import Pkcs11Kms
from gateway.kms.settings import KmsConfig

from ..conftest import GatewayFactory, gateway_log_events
from .encryption_clients import (
    as_sent,
    consume,
    new_topic,
    produce,
    sealed_per_batch,
    segments_contain,
)

pytestmark = pytest.mark.integration
DEK_AGE = 3.0  # seconds a DEK encrypts for; also how long an unwrapped one is kept


@pytest.fixture(scope="module")
def hsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SoftHsm]:
    token = SoftHsm(tmp_path_factory.mktemp("softhsm")).start()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in token.env.items():
            patch.setenv(key, value)  # this process and the gateway it starts
        yield token


@pytest.fixture(scope="module")
def kms(hsm: SoftHsm) -> Iterator[Pkcs11Kms]:
    manager = Pkcs11Kms(KmsConfig.model_validate(hsm.kms_config()).pkcs11)  # type: ignore[arg-type]
    for name in ("default", "alpha", "beta"):
        manager.create(name)
    yield manager
    manager.close()


@pytest.fixture(scope="module")
def encrypting(gateway_factory: GatewayFactory, hsm: SoftHsm, kms: Pkcs11Kms) -> GatewayProcess:
    config = {
        "kms": hsm.kms_config(),
        "dek": {"max_age_seconds": DEK_AGE, "decrypt_cache_seconds": DEK_AGE},
        "policies": [
            {"tenant": "*", "prefixes": ["enc.a.bt."], "kek": "alpha", "granularity": "batch"},
            {"tenant": "*", "prefixes": ["enc.a."], "kek": "alpha"},
            {"tenant": "*", "prefixes": ["enc.b."], "kek": "beta"},
            {"tenant": "*", "prefixes": ["enc.kh."], "fields": ["value", "key", "headers"]},
            {"tenant": "*", "prefixes": ["enc.bt.", "enc.java.bt."], "granularity": "batch"},
            {"tenant": "*", "prefixes": ["enc."]},
        ],
    }
    return gateway_factory(
        filters=[{"module": "gateway.encryption:EncryptionFilter", "config": config}]
    )


@pytest.mark.parametrize("granularity", ["record", "batch"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_round_trip_and_ciphertext_at_rest(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster, codec: str, granularity: str
) -> None:
    topic = new_topic(encrypting.bootstrap, "enc.c." if granularity == "record" else "enc.bt.c.")
    sent = produce(encrypting.bootstrap, topic, 40, codec, **{"compression.type": codec})
    got = consume(encrypting.bootstrap, topic, len(sent), assign=codec != "none")
    assert as_sent(got) == [(k, v, h, t) for k, v, h, t in sent]
    assert [m.offset() for m in got] == list(range(len(sent)))
    direct = consume(kafka_cluster.bootstrap_servers, topic, len(sent), assign=True)
    assert len(direct) == len(sent)
    if granularity == "record":
        assert all(m.value()[:4] == b"KGE\x01" and b"MARKER" not in m.value() for m in direct)
        assert [m.key() for m in direct] == [k for k, *_ in sent]  # keys stay (per policy)
    else:
        assert sealed_per_batch(direct) and direct[0].value()[:4] == b"KGE\x02"
        assert [m.timestamp()[1] for m in direct][-1] == sent[-1][3]  # the batch's max
        assert not segments_contain(kafka_cluster, topic, b"key-")
        assert not segments_contain(kafka_cluster, topic, b"hv-")
    assert not segments_contain(kafka_cluster, topic, b"MARKER-")


def test_keys_and_headers_inside_when_the_policy_says(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    topic = new_topic(encrypting.bootstrap, "enc.kh.")
    sent = produce(encrypting.bootstrap, topic, 10, "kh")
    assert as_sent(consume(encrypting.bootstrap, topic, 10)) == sent
    direct = consume(kafka_cluster.bootstrap_servers, topic, 10, assign=True)
    assert all(m.key() is None and not m.headers() for m in direct)
    assert not segments_contain(kafka_cluster, topic, b"key-kh-")
    assert not segments_contain(kafka_cluster, topic, b"hv-kh-")


def test_unencrypted_topic_and_earlier_records_pass_unchanged(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    plain = new_topic(encrypting.bootstrap, "plain.")
    sent = produce(encrypting.bootstrap, plain, 5, "plain")
    assert segments_contain(kafka_cluster, plain, b"MARKER-plain-")
    # records written to an encrypted-by-policy name directly (before the policy) pass
    mixed = new_topic(encrypting.bootstrap, "enc.m.")
    before = produce(kafka_cluster.bootstrap_servers, mixed, 3, "before")
    after = produce(encrypting.bootstrap, mixed, 3, "after")
    assert as_sent(consume(encrypting.bootstrap, mixed, 6)) == before + after
    assert as_sent(consume(encrypting.bootstrap, plain, 5)) == sent
    # a value that looks like an envelope, from a tenant the policy covers: sealed like
    # any other, and it comes back as written (not opened as if it were one)
    forged = b"KGE\x01\x00\x05alpha\x00\x01\x28" + b"\x00" * 80
    producer = Producer({"bootstrap.servers": encrypting.bootstrap, "acks": "all"})
    producer.produce(mixed, value=forged, key=b"forged")
    assert producer.flush(60) == 0
    got = consume(encrypting.bootstrap, mixed, 7)
    assert [(m.key(), m.value()) for m in got[6:]] == [(b"forged", forged)], got[6:]


@pytest.mark.parametrize("prefix", ["enc.tx.", "enc.bt.tx."])
def test_transactional_producer_and_read_committed(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster, prefix: str
) -> None:
    topic = new_topic(encrypting.bootstrap, prefix)
    producer = Producer(
        {"bootstrap.servers": encrypting.bootstrap, "transactional.id": f"tx-{topic}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"MARKER-aborted-{i}".encode())
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"MARKER-committed-{i}".encode())
    producer.commit_transaction(30)
    got = consume(encrypting.bootstrap, topic, 5, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [f"MARKER-committed-{i}".encode() for i in range(5)]
    assert not segments_contain(kafka_cluster, topic, b"MARKER-")


def test_a_compacted_topic_needs_record_granularity(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    """A compacted topic refuses a batch sealed whole (its envelope record has no key):
    nothing is written, the client gets INVALID_RECORD and the gateway says what to
    change; under a record policy the same topic works, keys kept for compaction."""
    admin = AdminClient({"bootstrap.servers": encrypting.bootstrap})
    names = {
        g: f"{p}cmp.{uuid.uuid4().hex[:8]}" for g, p in (("batch", "enc.bt."), ("record", "enc."))
    }
    compact = {"cleanup.policy": "compact"}
    futures = admin.create_topics([NewTopic(n, 1, 3, config=compact) for n in names.values()])
    for future in futures.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": encrypting.bootstrap, "message.timeout.ms": 20000})
    errors: list[Any] = []
    producer.produce(
        names["batch"], key=b"k", value=b"MARKER-compact", on_delivery=lambda e, m: errors.append(e)
    )
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    refused = gateway_log_events(encrypting, "encryption_refused")
    assert any("needs granularity: record" in e["msg"] for e in refused), refused
    sent = produce(encrypting.bootstrap, names["record"], 5, "cmp")
    assert as_sent(consume(encrypting.bootstrap, names["record"], 5)) == sent
    assert not segments_contain(kafka_cluster, names["batch"], b"MARKER-")
    assert not segments_contain(kafka_cluster, names["record"], b"MARKER-")


def kgw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], capture_output=True, text=True, check=False,
        env=os.environ.copy(), timeout=60,
    )  # fmt: skip


def test_rotation_disable_and_shredding(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(encrypting.config), encoding="utf-8")
    trail = tmp_path / "audit.jsonl"
    audit = ["--audit-trail", str(trail)]
    a = new_topic(encrypting.bootstrap, "enc.a.")
    ab = new_topic(encrypting.bootstrap, "enc.a.bt.")  # the same KEK, batches sealed whole
    b = new_topic(encrypting.bootstrap, "enc.b.")
    first = produce(encrypting.bootstrap, a, 3, "v1")
    first_b = produce(encrypting.bootstrap, ab, 3, "v1b")
    done = kgw("keys", "rotate", "--config", str(config), "alpha", *audit)
    assert done.returncode == 0, done.stderr
    assert '"versions": [1, 2]' in done.stdout
    time.sleep(DEK_AGE + 0.5)  # the gateway's DEK of version 1 ages out
    second = produce(encrypting.bootstrap, a, 3, "v2")
    second_b = produce(encrypting.bootstrap, ab, 3, "v2b")
    assert as_sent(consume(encrypting.bootstrap, a, 6)) == first + second
    assert as_sent(consume(encrypting.bootstrap, ab, 6)) == first_b + second_b
    direct = consume(kafka_cluster.bootstrap_servers, a, 6, assign=True)
    assert {m.value()[11:13] for m in direct} == {b"\x00\x01", b"\x00\x02"}  # alpha v1, v2
    direct = consume(kafka_cluster.bootstrap_servers, ab, 6, assign=True)
    assert sealed_per_batch(direct)
    assert {m.value()[12:14] for m in direct if m.value()} == {b"\x00\x01", b"\x00\x02"}

    done = kgw("keys", "disable", "--config", str(config), "alpha", *audit)
    assert done.returncode == 0, done.stderr
    time.sleep(DEK_AGE + 0.5)
    producer = Producer({"bootstrap.servers": encrypting.bootstrap, "message.timeout.ms": 20000})
    errors: list[Any] = []
    producer.produce(a, value=b"MARKER-refused", on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    refused = gateway_log_events(encrypting, "encryption_refused")
    assert refused and "KEK 'alpha' is disabled" in refused[-1]["msg"], refused
    assert as_sent(consume(encrypting.bootstrap, a, 6)) == first + second  # still readable
    assert as_sent(consume(encrypting.bootstrap, ab, 6)) == first_b + second_b

    b_sent = produce(encrypting.bootstrap, b, 3, "beta")
    done = kgw("keys", "destroy", "--config", str(config), "alpha", *audit)
    assert done.returncode == 0, done.stderr
    listed = kgw("keys", "list", "--config", str(config), "--json")
    assert "alpha" not in listed.stdout and "beta" in listed.stdout
    time.sleep(DEK_AGE + 0.5)  # unwrapped DEKs of alpha leave the gateway's cache
    for shredded in (a, ab):
        got = consume(encrypting.bootstrap, shredded, 1)
        assert len(got) == 1 and isinstance(got[0], KafkaError), got  # never ciphertext
        assert got[0].code() == 2  # CORRUPT_MESSAGE (librdkafka: INVALID_MSG)
    assert gateway_log_events(encrypting, "decryption_failed")
    assert as_sent(consume(encrypting.bootstrap, b, 3)) == b_sent  # other KEKs unaffected
    actions = [line for line in trail.read_text().splitlines() if line.strip()]
    assert [
        a for a in ("kek.rotate", "kek.disable", "kek.destroy") if any(a in x for x in actions)
    ] == ["kek.rotate", "kek.disable", "kek.destroy"]


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# (codec, topic prefix) for each client below: every codec with batches sealed whole,
# and one with a record per envelope (format 1; the confluent tests run every codec)
RUNS = [(c, "enc.bt.") for c in CODECS] + [("gzip", "enc.")]


def expected(tag: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"key-{tag}-{i}".encode(), f"MARKER-{tag}-{i}".encode()) for i in range(count)]


def test_kafka_python_each_codec(encrypting: GatewayProcess, kafka_cluster: KafkaCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for codec, prefix in RUNS:
        topic = new_topic(encrypting.bootstrap, f"{prefix}kp.")
        producer = KafkaProducer(
            bootstrap_servers=encrypting.bootstrap, acks="all", linger_ms=20,
            compression_type=None if codec == "none" else codec,
        )  # fmt: skip
        want = expected(f"kp{codec}", 20)
        for key, value in want:
            producer.send(topic, key=key, value=value, headers=[("h", key)])
        producer.flush(60)
        producer.close()
        consumer = KafkaConsumer(
            topic, bootstrap_servers=encrypting.bootstrap, auto_offset_reset="earliest",
            consumer_timeout_ms=20000, enable_auto_commit=False,
        )  # fmt: skip
        got = []
        for message in consumer:
            got.append(message)
            if len(got) == len(want):
                break
        consumer.close()
        assert [(m.key, m.value, list(m.headers)) for m in got] == [
            (k, v, [("h", k)]) for k, v in want
        ], codec
        assert not segments_contain(kafka_cluster, topic, b"MARKER-")


def test_aiokafka_each_codec(encrypting: GatewayProcess, kafka_cluster: KafkaCluster) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run(codec: str, topic: str, want: list[tuple[bytes, bytes]]) -> list[Any]:
        producer = AIOKafkaProducer(
            bootstrap_servers=encrypting.bootstrap, acks="all",
            compression_type=None if codec == "none" else codec,
        )  # fmt: skip
        await producer.start()
        try:
            batch = producer.create_batch()
            for key, value in want:
                batch.append(key=key, value=value, timestamp=None, headers=[("h", key)])
            partitions = await producer.partitions_for(topic)
            await (await producer.send_batch(batch, topic, partition=min(partitions)))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=encrypting.bootstrap, auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
        await consumer.start()
        got: list[Any] = []
        try:
            while len(got) < len(want):
                got.append(await asyncio.wait_for(consumer.getone(), 30))
        finally:
            await consumer.stop()
        return got

    for codec, prefix in RUNS:
        topic = new_topic(encrypting.bootstrap, f"{prefix}aio.")
        want = expected(f"aio{codec}", 20)
        got = asyncio.run(run(codec, topic, want))
        assert [(m.key, m.value, list(m.headers)) for m in got] == [
            (k, v, [("h", k)]) for k, v in want
        ], codec
        assert not segments_contain(kafka_cluster, topic, b"MARKER-")


def test_java_console_tools_each_codec(
    encrypting: GatewayProcess, kafka_cluster: KafkaCluster
) -> None:
    runs = [(c, "enc.java.bt.", c) for c in CODECS] + [("gzip", "enc.java.", "rgzip")]
    for codec, prefix, tag in runs:
        topic = new_topic(encrypting.bootstrap, prefix)
        lines = "".join(f"key-j{tag}-{i}\tMARKER-j{tag}-{i}\n" for i in range(10))
        done = subprocess.run(
            kafka_cluster.tool_argv("console-producer", [
                "--bootstrap-server", encrypting.bootstrap, "--topic", topic,
                "--compression-codec", codec,
                "--property", "parse.key=true", "--property", "key.separator=\t",
            ]),
            input=lines.encode(), capture_output=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert not segments_contain(kafka_cluster, topic, b"MARKER-")
    done = subprocess.run(
        kafka_cluster.tool_argv("console-consumer", [
            "--bootstrap-server", encrypting.bootstrap, "--include", "enc[.]java[.].*",
            "--from-beginning", "--max-messages", str(10 * len(runs)), "--timeout-ms", "60000",
            "--property", "print.key=true", "--property", "key.separator=\t",
        ]),
        capture_output=True, timeout=240, check=False,
    )  # fmt: skip
    got = sorted(done.stdout.decode().splitlines())
    want = sorted(f"key-j{t}-{i}\tMARKER-j{t}-{i}" for _, _, t in runs for i in range(10))
    assert got == want, done.stderr[-2000:]


def test_kms_outage_cached_dek_serves_within_bounds_then_writes_fail(
    gateway_factory: GatewayFactory,
    kafka_cluster: KafkaCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A gateway of its own on a token of its own; the outage: the token's store goes
    away under the running gateway (what a network HSM's loss looks like to it)."""
    token = SoftHsm(tmp_path_factory.mktemp("softhsm-outage"), token_label="outage").start()
    made = subprocess.run(
        [sys.executable, "-c",
         "import json, sys; from gateway.kms.pkcs11 import Pkcs11Kms; "
         "from gateway.kms.settings import KmsConfig; "
         "Pkcs11Kms(KmsConfig.model_validate(json.loads(sys.argv[1])).pkcs11).create('default')",
         __import__("json").dumps(token.kms_config())],
        env={**os.environ, **token.env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    age = 12.0
    config = {
        "kms": token.kms_config(),
        "dek": {"max_age_seconds": age},
        "policies": [{"tenant": "*", "prefixes": ["enc."]}],
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOFTHSM2_CONF", token.env["SOFTHSM2_CONF"])
        gateway = gateway_factory(
            filters=[{"module": "gateway.encryption:EncryptionFilter", "config": config}]
        )
    topic = new_topic(gateway.bootstrap, "enc.outage.")
    first = produce(gateway.bootstrap, topic, 1, "before")  # the DEK is made now
    made_at = time.monotonic()
    tokens = token.workdir / "tokens"
    tokens.rename(token.workdir / "tokens.away")  # the outage begins
    try:
        during = produce(gateway.bootstrap, topic, 3, "during")
        assert time.monotonic() - made_at < age, "too slow to be within the DEK's bounds"
        time.sleep(max(0.0, age + 1 - (time.monotonic() - made_at)))
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "message.timeout.ms": 20000})
        errors: list[Any] = []
        producer.produce(topic, value=b"MARKER-after", on_delivery=lambda e, m: errors.append(e))
        producer.flush(30)
        assert errors and errors[0] is not None, errors
        assert errors[0].code() == KafkaError.INVALID_RECORD
        refused = gateway_log_events(gateway, "encryption_refused")
        assert refused and "token unavailable" in refused[-1]["msg"], refused
        assert gateway_log_events(gateway, "kms_unavailable")
        # records already written still decrypt from the cached DEK
        assert as_sent(consume(gateway.bootstrap, topic, 4)) == first + during
    finally:
        (token.workdir / "tokens.away").rename(tokens)
    direct = consume(kafka_cluster.bootstrap_servers, topic, 4, assign=True)
    assert len(direct) == 4
    probe = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "probe"})
    try:  # the refused record never reached a broker
        assert probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (0, 4)
    finally:
        probe.close()
    assert all(m.value()[:4] == b"KGE\x01" for m in direct)
    assert not segments_contain(kafka_cluster, topic, b"MARKER-")
