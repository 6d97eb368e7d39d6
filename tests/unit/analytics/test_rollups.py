"""The wide aggregate and the rollups, against a plain-Python reference.

Random records over three days (every decision, API, topic list and login outcome,
nulls included, plus lines that are not records) go through ``rollups`` in Spark;
each rollup must equal what a record-by-record computation of the same rule gives,
with the detection window on an hour boundary and at the first record.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from gateway.analytics import flags, rollups
from gateway.analytics.detect.rows import HostRow, HourRow, Single, TopicRow
from gateway.analytics.load import read_logs
from gateway.analytics.records import connection_record, request_record

START = 1_793_318_400  # 2026-10-30T00:00:00Z
HOUR = 3600
PRINCIPALS = ["User:a", "User:b", "User:c", None]
HOSTS = ["10.0.0.1", "10.0.0.2", "fd00:1:2:3::4", None]
DECISIONS = ["allow", "none", "partial", "deny", "error", None]
APIS = ["produce", "fetch", "metadata", None]
TOPIC_LISTS: list[list[str] | None] = [[], ["t1"], ["t1", "t1"], ["t2", "t3"], ["t4"], None]


def _records(rng: random.Random) -> list[dict[str, Any]]:
    records = []
    for _ in range(3000):
        ms = (START + rng.randrange(3 * 24 * HOUR)) * 1000 + rng.randrange(1000)
        principal = rng.choice(PRINCIPALS)
        host = rng.choice(HOSTS)
        tenant = rng.choice(["acme", "globex", None])
        if rng.random() < 0.25:
            record = connection_record(
                ms,
                rng.choice(["auth", "auth", "open", "close"]),
                instance="gw",
                conn="c",
                host=host or "",
                port=1,
                principal=principal,
                tenant=tenant,
                outcome=rng.choice(["success", "failure", None]),
            )
            record["client_host"] = host
        else:
            record = request_record(
                ms,
                instance="gw",
                conn="c",
                host=host or "",
                port=1,
                principal=principal or "",
                tenant=tenant or "",
                mechanism="PLAIN",
                api_key_id=None,
                client_id="app",
                api=rng.choice(APIS) or "",
                correlation_id=1,
                topics=[],
                groups=[],
                decision=rng.choice(DECISIONS) or "",
                bytes_in=rng.randrange(5000),
                bytes_out=rng.randrange(500),
                records=1,
                throttle_ms=rng.choice([0, 0, 0, 250]),
                latency_ms=1.0,
            )
            record.update(
                principal=principal,
                client_host=host,
                tenant=tenant,
                api=record["api"] or None,
                decision=record["decision"] or None,
                topics=rng.choice(TOPIC_LISTS),
            )
            if ms > (START + 50 * HOUR) * 1000 and rng.random() < 0.1:
                record["topics"] = ["t-late", "t1"]  # first used in the detection window
        records.append(record)
    return records


def _seconds(record: dict[str, Any]) -> int:
    from gateway.analytics.records import parse_rfc3339

    return int(parse_rfc3339(record["ts"]))


def _hour_rows(records: list[dict[str, Any]]) -> list[HourRow]:
    acc: dict[tuple[str, int], dict[str, Any]] = defaultdict(
        lambda: {"t": [], "a": 0, "b": 0, "d": 0, "n": 0}
    )
    for r in records:
        if r["type"] != "request" or r["principal"] is None:
            continue
        row = acc[(r["principal"], _seconds(r) // HOUR * HOUR)]
        row["t"].append(r["tenant"])
        if r["decision"] in flags.ALLOWED:
            row["a"] += 1
            row["b"] += (r["bytes_in"] or 0) + (r["bytes_out"] or 0)
        if r["decision"] in flags.DENIED:
            row["d"] += 1
        row["n"] += 1
    return [
        HourRow(
            p,
            h,
            max((t for t in v["t"] if t is not None), default=None),
            v["a"],
            v["b"],
            v["d"],
            v["n"],
        )
        for (p, h), v in sorted(acc.items())
    ]


def _denied_topics(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[str, ...]]:
    acc: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in records:
        if r["type"] == "request" and r["principal"] is not None and r["decision"] in flags.DENIED:
            for topic in r["topics"] or ():
                acc[(r["principal"], _seconds(r) // HOUR * HOUR)].add(topic)
    return {key: tuple(sorted(names)) for key, names in acc.items()}


def _singles(records: list[dict[str, Any]]) -> Counter[Single]:
    found: Counter[Single] = Counter()
    for r in records:
        failed = r["event"] == "auth" and r["outcome"] == "failure"
        throttled = r["type"] == "request" and (r["throttle_ms"] or 0) > 0
        if failed or throttled:
            kind = "auth_failure" if failed else "throttled"
            found[
                Single(
                    _seconds(r),
                    kind,
                    r["principal"],
                    r["tenant"],
                    r["client_host"],
                    r["throttle_ms"] or 0,
                )
            ] += 1
    return found


def _host_rows(records: list[dict[str, Any]], detect_from: int) -> list[HostRow]:
    acc: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in records:
        good = (r["event"] == "auth" and r["outcome"] == "success") or (
            r["type"] == "request" and r["decision"] in flags.ALLOWED
        )
        if good and r["principal"] is not None and r["client_host"] is not None:
            acc[(r["principal"], r["client_host"])].append(_seconds(r))
    rows = []
    for (p, host), times in sorted(acc.items()):
        recent = [t for t in times if t >= detect_from]
        rows.append(
            HostRow(
                p,
                host,
                len(times) - len(recent),
                len(recent),
                min(recent, default=None),
                max(times),
            )
        )
    return rows


def _topic_rows(records: list[dict[str, Any]], detect_from: int) -> list[TopicRow]:
    acc: dict[tuple[str, str], list[tuple[int, str | None]]] = defaultdict(list)
    for r in records:
        if (
            r["type"] == "request"
            and r["decision"] in ("allow", "none")
            and r["principal"] is not None
        ):
            for topic in r["topics"] or ():
                acc[(r["principal"], topic)].append((_seconds(r), r["api"]))
    rows = []
    for (p, topic), uses in sorted(acc.items()):
        first = min(t for t, _ in uses)
        if first < detect_from:
            continue
        apis = {api for t, api in uses if t >= detect_from}
        rows.append(
            TopicRow(
                p,
                topic,
                first,
                max(t for t, _ in uses),
                sum(1 for t, _ in uses if t >= detect_from),
                "produce" in apis,
                "fetch" in apis,
                any(api not in (None, "produce", "fetch") for api in apis),
            )
        )
    return rows


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    records = _records(random.Random(11))
    directory = tmp_path_factory.mktemp("rollups")
    lines = [json.dumps(r) for r in records] + ["not json", '{"v": 1, "type": "other"}']
    (directory / "access.jsonl").write_text("\n".join(lines) + "\n")
    return directory, records


@pytest.fixture(scope="module")
def prepared(spark: Any, logs: tuple[Path, list[dict[str, Any]]]) -> Any:
    return rollups.prepare(read_logs(spark, [str(logs[0])], "json")).cache()


@pytest.fixture(scope="module")
def events(prepared: Any) -> Any:
    return rollups.records(prepared)


@pytest.fixture(scope="module")
def groups(prepared: Any) -> Any:
    return rollups.principal_hours(prepared).toArrow()


@pytest.fixture(scope="module")
def topics(events: Any) -> Any:
    return rollups.topic_hours(events).toArrow()


def test_bounds_count_records_and_skipped_lines(
    groups: Any, logs: tuple[Path, list[dict[str, Any]]]
) -> None:
    records = logs[1]
    seconds = [_seconds(r) for r in records]
    assert rollups.bounds(groups) == (len(records) + 2, len(records), min(seconds), max(seconds))


def test_hourly_rows_and_denied_topics_match_the_records(
    groups: Any, topics: Any, logs: tuple[Path, list[dict[str, Any]]]
) -> None:
    got = rollups.hour_rows(groups)
    assert got == _hour_rows(logs[1])
    assert any(r.bytes for r in got) and any(r.denied for r in got)
    denied = rollups.denied_topics(topics)
    assert denied == _denied_topics(logs[1])
    assert any(len(names) > 1 for names in denied.values())


def test_singles_match_the_records(events: Any, logs: tuple[Path, list[dict[str, Any]]]) -> None:
    got = Counter(rollups.singles(events))
    expected = _singles(logs[1])
    assert got == expected
    assert {s.kind for s in got} == {"auth_failure", "throttled"}


@pytest.mark.parametrize("window", ["on the hour", "from the first record"])
def test_address_and_topic_rows_match_the_records(
    groups: Any, topics: Any, logs: tuple[Path, list[dict[str, Any]]], window: str
) -> None:
    records = logs[1]
    start = min(_seconds(r) for r in records)
    # The job's window starts on an hour, or at the first record when that is later.
    detect_from = START + 2 * 24 * HOUR if window == "on the hour" else start
    hosts = rollups.host_rows(groups, detect_from)
    assert hosts == _host_rows(records, detect_from)
    assert any(h.base for h in hosts) or window != "on the hour"
    new_topics = rollups.new_topic_rows(topics, detect_from)
    assert new_topics == _topic_rows(records, detect_from)
    assert new_topics


def test_parquet_with_and_without_stored_flags_gives_the_same_rollups(
    spark: Any,
    groups: Any,
    topics: Any,
    events: Any,
    logs: tuple[Path, list[dict[str, Any]]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``write_parquet`` stores the flags (and microsecond timestamps); Parquet from
    elsewhere has no flags column, and a dataset mixing both reads the same."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from gateway.analytics.load import usable, write_parquet
    from gateway.analytics.records import FIELDS

    root = tmp_path_factory.mktemp("parquet")
    good = usable(read_logs(spark, [str(logs[0])], "json"))
    first_day = F.col("ts") < F.lit(START + 24 * HOUR).cast("timestamp")
    write_parquet(good.where(~first_day), str(root))
    good.where(first_day).select(*FIELDS).write.parquet(str(root / "day=2026-10-30"))
    stored = next((root / "day=2026-10-31").rglob("*.parquet"))
    schema = pq.read_schema(stored)
    assert schema.field("ts").type.unit == "us" and flags.COLUMN in schema.names

    assert flags.stored_in([str(root)]) is False  # one day has no flags column
    assert flags.stored_in([str(root / "day=2026-10-31")]) is True
    assert flags.stored_in(["s3a://bucket/logs"]) is None  # Spark decides
    frame = read_logs(spark, [str(root)], "parquet")
    assert flags.COLUMN in frame.columns
    # The stored flags are exactly what the expression computes.
    assert frame.where(F.col(flags.COLUMN) != flags.expression()).count() == 0
    prepared = rollups.prepare(frame)
    parquet_events = rollups.records(prepared)
    assert parquet_events.count() == len(logs[1])

    parquet_groups = rollups.principal_hours(prepared).toArrow()
    parquet_topics = rollups.topic_hours(parquet_events).toArrow()
    assert rollups.hour_rows(parquet_groups) == rollups.hour_rows(groups)
    assert rollups.denied_topics(parquet_topics) == rollups.denied_topics(topics)
    detect_from = START + 2 * 24 * HOUR
    assert Counter(rollups.singles(parquet_events)) == Counter(rollups.singles(events))
    assert rollups.host_rows(parquet_groups, detect_from) == rollups.host_rows(groups, detect_from)
    assert rollups.new_topic_rows(parquet_topics, detect_from) == rollups.new_topic_rows(
        topics, detect_from
    )


def test_the_batch_parts_of_the_singles_make_up_all_of_them(
    spark: Any, tmp_path: Path, logs: tuple[Path, list[dict[str, Any]]]
) -> None:
    """The batch job reads the failed logins and throttled requests in one pass (no
    ``topics``/``groups``) and the administrative requests in another: together exactly
    the rows of ``--follow``'s one pass, a throttled administrative request included."""
    rng = random.Random(5)
    records = list(logs[1])
    for i in range(60):
        record = request_record(
            (START + 60 * HOUR + i * 61) * 1000,
            instance="gw",
            conn="c",
            host="10.0.0.9",
            port=1,
            principal=rng.choice(["User:a", "User:b"]),
            tenant="acme",
            mechanism="PLAIN",
            api_key_id=None,
            client_id="app",
            api=rng.choice(["delete_topics", "delete_groups", "create_topics", "metadata"]),
            correlation_id=1,
            topics=["t1", "t2"][: rng.randrange(3)],
            groups=["g1"][: rng.randrange(2)],
            decision=rng.choice(["allow", "deny", "partial"]),
            bytes_in=10,
            bytes_out=10,
            records=0,
            throttle_ms=rng.choice([0, 300]),
            latency_ms=1.0,
        )
        records.append(record)
    (tmp_path / "access.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    events = rollups.records(rollups.prepare(read_logs(spark, [str(tmp_path)], "json")))
    whole = rollups.singles(events)
    logins, admin = rollups.singles(events, "logins"), rollups.singles(events, "admin")
    assert {s.kind for s in logins} == {"auth_failure", "throttled"}
    assert {s.kind for s in admin} == {"admin"}
    assert any(s.throttle_ms > 0 for s in admin)  # throttled, yet administrative
    assert Counter(logins) + Counter(admin) == Counter(whole)
    assert [s for s in whole if s.kind == "admin"] == admin
    with pytest.raises(ValueError, match="unknown part"):
        rollups.singles_frame(events, "other")
