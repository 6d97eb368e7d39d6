"""``kgw analyze --follow`` works incrementally (issue 17): the rollups of each
micro-batch merged into the state kept in the checkpoint give the batch job's findings.

The Spark test feeds a simulated scenario (with its attacks and traps) to the
follower's ``foreachBatch`` handler in four micro-batches of records drawn at random
(not in time order, as a topic's partitions deliver them), restarts the follower from
its checkpoint in the middle and replays a micro-batch (as Spark does after a crash
before its commit), and compares the findings with the batch job's on the same records:
same ids, same evidence; none emitted twice, none lost. The other tests are pure
(Arrow only): merging, forgetting old hours, saving and replaying the state.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gateway.analytics import microbatch, rollups, state
from gateway.analytics.findings import Finding
from gateway.analytics.flags import Flag
from gateway.analytics.follow import Follower
from gateway.analytics.job import AnalyzeOptions, analyze
from gateway.analytics.load import read_logs
from gateway.analytics.settings import FollowConfig, SourceConfig
from gateway.analytics.simulate import SimulationOptions, simulate
from gateway.analytics.spark import Progress

HOUR = 3600
GROUPS = pa.schema(
    [("principal", pa.string()), ("tenant", pa.string()), ("hour", pa.int64()),
     ("host", pa.string()), ("lines", pa.int64()), ("records", pa.int64()),
     ("first", pa.int64()), ("last", pa.int64()), ("total", pa.int64()),
     ("allowed", pa.int64()), ("bytes", pa.int64()), ("denied", pa.int64())]
)  # fmt: skip
TOPICS = pa.schema(
    [("principal", pa.string()), ("hour", pa.int64()), ("topic", pa.string()),
     ("allowed", pa.int64()), ("first", pa.int64()), ("last", pa.int64()),
     ("apis", pa.int32()), ("denied", pa.int64())]
)  # fmt: skip
SINGLES = pa.schema(
    [("ts_s", pa.int64()), ("kind", pa.string()), ("principal", pa.string()),
     ("tenant", pa.string()), ("client_host", pa.string()), ("throttle_ms", pa.int64()),
     ("api", pa.string()), ("targets", pa.list_(pa.string())), ("allowed", pa.bool_())]
)  # fmt: skip


def _rollups(groups: list[tuple[Any, ...]], topics: list[tuple[Any, ...]],
             singles: list[tuple[Any, ...]]) -> state.Rollups:  # fmt: skip
    def table(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
        return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)

    return state.Rollups(table(groups, GROUPS), table(topics, TOPICS), table(singles, SINGLES))


PRO, FET, OTH = int(Flag.PRODUCE), int(Flag.FETCH), int(Flag.OTHER_API)
ONE = _rollups(
    [("User:a", "t", 0, "10.0.0.1", 5, 5, 10, 20, 5, 4, 400, 1, ),
     ("User:a", "t", 0, None, 2, 1, 15, 15, 0, 0, 0, 0),
     (None, None, 0, None, 3, 0, None, None, 0, 0, 0, 0)],
    [("User:a", 0, "t.x", 3, 10, 20, PRO, 0), ("User:a", 0, "t.y", 0, None, None, None, 2)],
    [(30, "auth_failure", "User:a", None, "10.9.9.9", 0, None, None, True)],
)  # fmt: skip
TWO = _rollups(
    [("User:a", "t", 0, "10.0.0.1", 2, 2, 5, 12, 2, 2, 100, 0),
     (None, None, 0, None, 1, 0, None, None, 0, 0, 0, 0),
     ("User:a", "t", HOUR, "10.0.0.1", 1, 1, HOUR + 3, HOUR + 3, 1, 1, 10, 0)],
    [("User:a", 0, "t.x", 1, 5, 9, FET, 0), ("User:a", 0, "t.y", 0, None, None, None, 1),
     ("User:a", 0, "t.z", 1, 7, 7, OTH, 0)],
    [(HOUR + 9, "throttled", "User:a", "t", "10.0.0.1", 500, None, None, True)],
)  # fmt: skip


def _rows(table: pa.Table, keys: int) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return {r[:keys]: r[keys:] for r in rows}


def test_merged_rollups_are_those_of_the_union() -> None:
    merged = state.merge(ONE, TWO)
    assert merged.groups.schema == GROUPS and merged.topics.schema == TOPICS
    assert _rows(merged.groups, 4) == {
        ("User:a", "t", 0, "10.0.0.1"): (7, 7, 5, 20, 7, 6, 500, 1),
        ("User:a", "t", 0, None): (2, 1, 15, 15, 0, 0, 0, 0),
        (None, None, 0, None): (4, 0, None, None, 0, 0, 0, 0),  # null keys are one group
        ("User:a", "t", HOUR, "10.0.0.1"): (1, 1, HOUR + 3, HOUR + 3, 1, 1, 10, 0),
    }
    assert _rows(merged.topics, 3) == {
        ("User:a", 0, "t.x"): (4, 5, 20, PRO | FET, 0),  # the APIs or-ed
        ("User:a", 0, "t.y"): (0, None, None, None, 3),  # never allowed: no APIs, as Spark
        ("User:a", 0, "t.z"): (1, 7, 7, OTH, 0),
    }
    assert merged.singles.num_rows == 2
    assert state.merge(None, ONE) is ONE
    assert state.data_end(merged) == HOUR + 3


def test_pruning_forgets_whole_hours_before_the_horizon() -> None:
    pruned = state.prune(state.merge(ONE, TWO), HOUR + 1800)
    assert set(pruned.groups.column("hour").to_pylist()) == {HOUR}
    assert pruned.topics.num_rows == 0
    assert pruned.singles.column("ts_s").to_pylist() == [HOUR + 9]


def test_a_replayed_batch_merges_into_the_state_before_it(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir()
    assert state.load(root, before=1 << 62) is None
    state.save(ONE, root, 4)
    state.save(state.merge(ONE, TWO), root, 5)
    loaded = state.load(root, before=5)  # batch 5 again: merged into batch 4's state
    assert loaded is not None and loaded[0] == 4
    assert loaded[1].groups.equals(ONE.groups)
    latest = state.load(root, before=1 << 62)
    assert latest is not None and latest[0] == 5
    state.save(ONE, root, 6)
    assert sorted(p.name for p in root.iterdir()) == ["batch=5", "batch=6"]
    (root / "batch=6" / "groups.parquet").write_bytes(b"torn")
    fallback = state.load(root, before=1 << 62)  # an unreadable state: the one before it
    assert fallback is not None and fallback[0] == 5


def _key(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return sorted(
        (f.id, f.detector, f.severity, round(f.score, 6), f.entity, f.start, f.end, f.summary,
         json.dumps(f.evidence, sort_keys=True, default=str))
        for f in findings
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_follow_mode_finds_what_the_batch_job_finds(spark: Any, tmp_path: Path) -> None:
    options = SimulationOptions(tenants=3, principals=5, hours=48, attacks=1)
    _, records, _ = simulate(options)
    whole = tmp_path / "all.jsonl"
    whole.write_text("".join(json.dumps(r) + "\n" for r in records))
    batch = analyze(
        spark,
        AnalyzeOptions((str(whole),), tmp_path / "batch", "json", detect_hours=24, report=False),
        Progress("test", 8, quiet=True),
    ).findings
    assert len(batch) >= 5, "the scenario's attacks give the batch job findings"

    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    chunks = [shuffled[i::4] for i in range(4)]

    def frame(i: int) -> Any:
        path = tmp_path / f"chunk{i}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in chunks[i]))
        return read_logs(spark, [str(path)], "json")

    config = FollowConfig(
        source=SourceConfig(bootstrap_servers="127.0.0.1:9", topic="kgw.access"),
        checkpoint_dir=tmp_path / "checkpoint",
        out=tmp_path / "out",
        retain_hours=1000,
        detect_hours=24,
    )
    first = Follower(spark, config, quiet=True)
    first.on_batch(frame(0), 0)
    first.on_batch(frame(1), 1)
    # A crash after batch 1's findings and state, before Spark committed it: the
    # restarted follower gets batch 1 again, then the rest.
    again = Follower(spark, config, quiet=True)
    assert again.state_id == 1
    for i in (1, 2, 3):
        again.on_batch(frame(i), i)
    assert _key(again.findings) == _key(batch)

    lines = (config.out / "findings.jsonl").read_text().splitlines()
    emitted = [json.loads(line)["id"] for line in lines]
    assert len(emitted) == len(set(emitted)), "no finding emitted twice"
    assert {f.id for f in batch} <= set(emitted), "no finding lost"
    assert sorted(p.name for p in (config.checkpoint_dir / "state").iterdir()) == [
        "batch=2",
        "batch=3",
    ]


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.timeout(900)
def test_micro_batch_rollups_in_arrow_are_sparks(spark: Any, tmp_path: Path) -> None:
    _, records, _ = simulate(SimulationOptions(tenants=3, principals=5, hours=48, attacks=1))
    path = tmp_path / "records.jsonl"
    with path.open("w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
        fh.write('{"type": "request"}\n{"v": 1, "ts": "not a time"}\n')  # unreadable lines
    prepared = rollups.prepare(read_logs(spark, [str(path)], "json"), False)
    sparks = state.collect(spark, prepared)
    arrows = microbatch.rollups_of(prepared.toArrow())
    assert sparks.singles.num_rows > 0 and sparks.topics.num_rows > 0
    for name in state.TABLES:
        mine, theirs = getattr(arrows, name), getattr(sparks, name)
        assert mine.column_names == theirs.column_names, name
        assert _sorted(mine.cast(theirs.schema)) == _sorted(theirs), name
