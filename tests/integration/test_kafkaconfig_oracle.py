"""gateway.kafkaconfig against Kafka itself: the broker's jars read the same values.

Runs Kafka 4.1's ``ConfigDef.parseType`` and topic validators (``LogConfig``) in a
JVM on thousands of tenant-like values and compares every answer with
``parse_topic_value``; and compares the key table with the broker's. Needs Java
and the Kafka jars (fetched like the cluster fixture's); fails without them.
"""

from __future__ import annotations

import random
import struct
import subprocess
from pathlib import Path

from gateway.devstack import kafka_dist
from gateway.kafkaconfig import TOPIC_CONFIGS, InvalidConfig, Value, parse_topic_value

ORACLE = Path(__file__).parent / "kafkaconfig_oracle" / "ConfigOracle.java"
POOL = [*"0123456789+-_ \t\n\x0b\x01\x1f\x7f\xa0\u2003eE.xXpPfFdD,*:",
        "\u0663", "\u0661", "\uff10", "\uff11\uff12", "\U0001d7cf",  # digits of other scripts
        "\u017f", "\u0131", "\u0130", "\u212a",  # letters whose case maps to ASCII
        "NaN", "Infinity", "true", "false", "TRUE",
        "compact", "delete", "gzip", "CreateTime", "9223372036854775807", "9223372036854775808",
        "2147483647", "2147483648", "0x1", "p-3", "1e3"]  # fmt: skip
CASES = 30_000


def oracle(mode: str, stdin: str = "") -> list[str]:
    libs = kafka_dist.ensure_kafka()
    argv = [kafka_dist.java_executable(), "-cp", kafka_dist.java_classpath(libs), str(ORACLE)]
    done = subprocess.run(
        [*argv, mode], input=stdin.encode(), capture_output=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode().splitlines()


def encoded(value: Value) -> str:
    """The oracle's encoding of a parsed value."""
    if isinstance(value, bool):
        return "V" + str(value).lower()
    if isinstance(value, float):
        return "D" + format(struct.unpack(">Q", struct.pack(">d", value))[0], "x")
    if isinstance(value, tuple):
        return "L" + "".join(item.encode().hex() + "," for item in value)
    if isinstance(value, str):
        return "S" + value.encode().hex()
    return f"V{value}"


def ours(name: str, value: str) -> str:
    try:
        return "OK\t" + encoded(parse_topic_value(name, value))
    except InvalidConfig:
        return "ERR"


def test_the_key_table_is_the_brokers() -> None:
    brokers = dict(line.split("\t") for line in oracle("keys"))
    assert {name: spec.type.value for name, spec in TOPIC_CONFIGS.items()} == brokers


def test_every_value_is_read_as_the_broker_reads_it() -> None:
    rng = random.Random(20261124)
    names = sorted(TOPIC_CONFIGS)
    cases = [
        (rng.choice(names), "".join(rng.choice(POOL) for _ in range(rng.randint(0, 6))))
        for _ in range(CASES)
    ]
    answers = oracle("parse", "".join(f"{n}\t{v.encode().hex()}\n" for n, v in cases))
    assert len(answers) == len(cases)
    accepted = sum(answer.startswith("OK") for answer in answers)
    assert accepted > CASES // 50  # the comparison covers values the broker accepts
    wrong = [
        (name, value, answer)
        for (name, value), answer in zip(cases, answers, strict=True)
        if ours(name, value) != (answer if answer.startswith("OK") else "ERR")
    ]
    assert not wrong, wrong[:10]
