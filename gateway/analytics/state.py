"""The rollups of ``kgw analyze --follow``, merged micro-batch by micro-batch.

The batch job's three Spark passes (:mod:`.rollups`: per principal, tenant, hour and
address; per principal, hour and topic; the failed logins, throttled and administrative
requests one by one) are made of sums, minimums, maximums and a bitwise or, so the
rollups of two sets of records merge into the rollups of their union: the same rows
the batch job would make from all of them. :class:`Rollups` holds the three as Arrow
tables; :func:`merge` adds a micro-batch's, :func:`prune` forgets the hours older than
the history the detectors need, :func:`save` and :func:`load` keep them under the
checkpoint, one directory per micro-batch (``state/batch=<id>/``, written whole then
renamed into place). No Spark here, except :func:`collect`, which runs the three passes
on a frame of records.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import rollups
from .flags import Flag
from .spark import FIRST, LATER, in_pool

log = logging.getLogger(__name__)
HOUR = 3600
TABLES = ("groups", "topics", "singles")
GROUP_KEYS = ("principal", "tenant", "hour", "host")
GROUP_SUMS = ("lines", "records", "total", "allowed", "bytes", "denied")
TOPIC_KEYS = ("principal", "hour", "topic")
TOPIC_SUMS = ("allowed", "denied")
API_FLAGS = (Flag.PRODUCE, Flag.FETCH, Flag.OTHER_API)
_BATCH = re.compile(r"^batch=(\d+)$")


@dataclass(frozen=True, slots=True)
class Rollups:
    """The three rollups of a set of records, as the batch job collects them."""

    groups: Any  # pyarrow.Table, rollups.principal_hours
    topics: Any  # pyarrow.Table, rollups.topic_hours
    singles: Any  # pyarrow.Table, rollups.singles_frame

    def tables(self) -> dict[str, Any]:
        return {"groups": self.groups, "topics": self.topics, "singles": self.singles}


def collect(spark: Any, prepared: Any) -> Rollups:
    """The three passes of the batch job on ``prepared`` (:func:`.rollups.prepare`),
    submitted at once, collected as Arrow tables."""
    events = rollups.records(prepared)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="kgw-follow") as pool:
        singles = pool.submit(in_pool(spark, FIRST, rollups.singles_frame(events).toArrow))
        groups = pool.submit(in_pool(spark, FIRST, rollups.principal_hours(prepared).toArrow))
        topics = pool.submit(in_pool(spark, LATER, rollups.topic_hours(events).toArrow))
        return Rollups(groups.result(), topics.result(), singles.result())


def merge(old: Rollups | None, new: Rollups) -> Rollups:
    """The rollups of the records of ``old`` and ``new`` together."""
    if old is None:
        return new
    import pyarrow as pa

    def both(name: str) -> Any:
        first, second = getattr(old, name), getattr(new, name)
        return pa.concat_tables([first, second.cast(first.schema)])

    return Rollups(_groups(both("groups")), _topics(both("topics")), both("singles"))


def _groups(table: Any) -> Any:
    aggregates = [(c, "sum") for c in GROUP_SUMS] + [("first", "min"), ("last", "max")]
    merged = table.group_by(list(GROUP_KEYS), use_threads=False).aggregate(aggregates)
    return _like(table, merged, aggregates)


def _topics(table: Any) -> Any:
    """Sums, min and max as for the groups; ``apis`` (a bitwise or, null when every
    part is null, as Spark's ``bit_or``) merged one bit at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    apis = table.column("apis")
    bits = {
        f"api{int(flag)}": pc.not_equal(pc.bit_wise_and(apis, pa.scalar(int(flag), apis.type)), 0)
        for flag in API_FLAGS
    }
    for name, column in bits.items():
        table = table.append_column(name, column)
    aggregates = [(c, "sum") for c in TOPIC_SUMS] + [("first", "min"), ("last", "max")]
    aggregates += [(name, "any") for name in bits]
    merged = table.group_by(list(TOPIC_KEYS), use_threads=False).aggregate(aggregates)
    ored = None
    for flag in API_FLAGS:
        part = pc.if_else(
            merged.column(f"api{int(flag)}_any"),
            pa.scalar(int(flag), apis.type),
            pa.scalar(0, apis.type),
        )
        ored = part if ored is None else pc.bit_wise_or(ored, part)
    merged = merged.append_column("apis_any", ored)
    return _like(table.drop_columns(list(bits)), merged, [*aggregates, ("apis", "any")])


def _like(original: Any, merged: Any, aggregates: list[tuple[str, str]]) -> Any:
    """``merged``'s columns renamed and ordered as ``original``'s, with its types."""
    import pyarrow as pa

    names = {f"{column}_{op}": column for column, op in aggregates}
    merged = merged.rename_columns([names.get(n, n) for n in merged.column_names])
    columns = [merged.column(name) for name in original.column_names]
    return pa.Table.from_arrays(columns, names=original.column_names).cast(original.schema)


def data_end(state: Rollups) -> int | None:
    """The last second of the records the rollups hold."""
    import pyarrow.compute as pc

    last = pc.max(state.groups.column("last")).as_py()
    return None if last is None else int(last)


def prune(state: Rollups, horizon: int) -> Rollups:
    """Forget the hours before the one ``horizon`` falls in (and the failed logins,
    throttled and administrative requests of those hours)."""
    import pyarrow.compute as pc

    first_hour = horizon // HOUR * HOUR
    groups = state.groups.filter(pc.greater_equal(state.groups.column("hour"), first_hour))
    topics = state.topics.filter(pc.greater_equal(state.topics.column("hour"), first_hour))
    singles = state.singles.filter(pc.greater_equal(state.singles.column("ts_s"), first_hour))
    return Rollups(groups, topics, singles)


def save(state: Rollups, root: Path, batch_id: int) -> Path:
    """Write ``state`` as ``root/batch=<batch_id>/`` (replacing it if a replayed batch
    wrote it before), then forget all but it and the one before it."""
    import pyarrow.parquet as pq

    target = root / f"batch={batch_id}"
    tmp = root / f".batch={batch_id}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, table in state.tables().items():
        pq.write_table(table, tmp / f"{name}.parquet", compression="zstd")
    _fsync_dir(tmp, files=True)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    _fsync_dir(root)
    kept = sorted(_ids(root))[-2:]
    for old in _ids(root):
        if old not in kept:
            shutil.rmtree(root / f"batch={old}", ignore_errors=True)
    return target


def load(root: Path, before: int) -> tuple[int, Rollups] | None:
    """The newest saved state of a micro-batch before ``before`` (a replayed batch
    is merged into the state that preceded it), or None."""
    import pyarrow.parquet as pq

    for batch_id in sorted((i for i in _ids(root) if i < before), reverse=True):
        directory = root / f"batch={batch_id}"
        try:
            tables = [pq.read_table(directory / f"{name}.parquet") for name in TABLES]
        except (OSError, ValueError) as exc:
            log.warning(
                "analytics.follow_state_unreadable",
                extra={"path": str(directory), "error": str(exc)},
            )
            continue
        return batch_id, Rollups(*tables)
    return None


def _ids(root: Path) -> list[int]:
    if not root.exists():
        return []
    return [int(m.group(1)) for p in root.iterdir() if (m := _BATCH.match(p.name))]


def _fsync_dir(path: Path, files: bool = False) -> None:
    """fsync ``path`` (a directory), and with ``files`` the files in it."""
    for item in [*(p for p in path.iterdir() if p.is_file()), path] if files else [path]:
        fd = os.open(item, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
