"""``encode_line`` (orjson, decision 0048; the stdlib encoder as the fallback) writes the
bytes ``json.dumps`` with the access log's settings always wrote, whatever the record
holds (issue 16, decisions 0047 and 0048) — except NaN and ±Infinity, written as
``null`` (JSON has no spelling for them), and floats in exponent form, whose exponent
is spelled without padding (the same number); no record holds either."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import threading
import uuid
from typing import Any

import pytest

from gateway.accesslog.files import encode_line
from gateway.accesslog.records import Resources, request_record
from gateway.identity import ClientIdentity


def _reference(entry: dict[str, Any]) -> bytes:
    text = json.dumps(entry, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8", "replace") + b"\n"


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(str):
    pass


@dataclasses.dataclass
class _Point:
    x: int


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


ODD: list[dict[str, Any]] = [
    {},
    {"a": None, "b": True, "c": False, "d": 0, "e": -1, "f": 1.5, "g": 1e16, "h": 0.1},
    {"neg": -0.0, "ms": 12.346, "r": 2 / 3, "latencies": [0.001, 0.5, 999.999, 86400000.0]},
    {"i64": 2**63 - 1, "u64": 2**64 - 1, "beyond": 2**64, "negative_beyond": -(2**63) - 1},
    {"intenum": _Level.HIGH, "str_subclass": _Name("s"), "dataclass": _Point(1)},
    {"uuid": uuid.UUID(int=7), "date": datetime.date(2026, 11, 26), "deep": _deep(300)},
    {"text": 'quote " backslash \\ tab \t newline \n nul \x00 del \x7f'},
    {"unicode": "ünïcödé ✓ 日本 \U0001f600", "surrogate": "\ud800 lone"},
    {"list": ["a", 1, None, [2, {"x": "y"}]], "tuple": ("t", 2)},
    {"when": datetime.datetime(2026, 11, 26, 15, 0), "bytes": b"\x00\xff", "set": {1}},
    {"nested": {"deeper": {"deepest": ["é"]}}, 3: "int key", None: "none key"},
]


@pytest.mark.parametrize("entry", ODD)
def test_odd_values_are_encoded_as_json_dumps_did(entry: dict[str, Any]) -> None:
    assert encode_line(entry) == _reference(entry)


def test_nan_and_infinity_are_written_as_null() -> None:
    entry = {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "n": 1}
    assert encode_line(entry) == b'{"nan":null,"inf":null,"ninf":null,"n":1}\n'


def test_floats_in_exponent_form_keep_their_value() -> None:
    """orjson spells an exponent without padding (``1e-7``; the stdlib ``1e-07``): the
    same number. Records hold no such float (``latency_ms`` is rounded to 3 places)."""
    entry = {"small": 1e-7, "big": 1.7976931348623157e308, "g": 1e16, "tiny": 5e-324}
    line = encode_line(entry)
    assert json.loads(line) == entry
    assert line.endswith(b"\n") and line.count(b"\n") == 1


def test_a_request_record_is_encoded_as_json_dumps_did() -> None:
    identity = ClientIdentity(listener="tls", host="::1", port=4242, principal="User:ä")
    identity.tenant, identity.sasl_mechanism = "t-ü", "SCRAM-SHA-512"
    entry = request_record(
        "gw-1", "c7", identity, api_key=0, api_version=12, correlation_id=9,
        client_id="prod\u00e9", bytes_in=6083, bytes_out=116, latency_ms=1.23456,
        decision="partial", rule="p, User:x, topic, a.*, write, deny", error_code=29,
        records=30, throttle_ms=4, resources=Resources(("a.b", "ç"), (), ("tx",), 3),
        now=1_795_000_000.5, namespace="ns.",
    )  # fmt: skip
    line = encode_line(entry)
    assert line == _reference(entry)
    assert list(json.loads(line)) == list(entry)


def test_threads_encoding_at_once_do_not_mix_their_lines() -> None:
    entries = [{"n": i, "text": "x" * (i % 50), "items": list(range(i % 7))} for i in range(300)]
    wanted = [_reference(e) for e in entries]
    results: list[list[bytes]] = []

    def work() -> None:
        results.append([encode_line(e) for e in entries])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [wanted] * 4
