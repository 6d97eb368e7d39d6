"""``rollups.hour_rows`` built in bulk gives the rows the hash aggregation gave (issue 17).

The per-principal-hour rows are read off the ``principal_hours`` table sorted by
principal, hour and tenant (descending, nulls last), with each sum the difference of a
cumulative sum at the ends of a run. Checked against the ``group_by`` it replaces on
random tables in several chunks: principal-hours split over tenants (nulls among them)
and addresses, rows without a principal or without requests, sums past 2**31, and an
empty table.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gateway.analytics import rollups
from gateway.analytics.detect.rows import HourRow

COUNTS = ("allowed", "bytes", "denied", "total")


def _grouped(groups: Any) -> list[HourRow]:
    """The rows as the hash aggregation made them before (the reference)."""
    per_tenant = groups.filter(
        pc.and_(pc.is_valid(groups.column("principal")), pc.greater(groups.column("total"), 0))
    )
    merged = (
        per_tenant.group_by(["principal", "hour"], use_threads=False)
        .aggregate([("tenant", "max"), *((name, "sum") for name in COUNTS)])
        .sort_by([("principal", "ascending"), ("hour", "ascending")])
    )
    names = ("principal", "hour", "tenant_max", *(f"{name}_sum" for name in COUNTS))
    columns = [merged.column(name).to_pylist() for name in names]
    return list(map(HourRow._make, zip(*columns, strict=True)))


def _table(rng: random.Random, rows: int) -> Any:
    principals = [f"User:{name}" for name in ("a", "b", "bb", "c", "é")] + [None]
    data: dict[str, list[Any]] = {name: [] for name in ("principal", "tenant", "hour", "host")}
    data.update({name: [] for name in ("lines", "records", "first", "last", *COUNTS)})
    for _ in range(rows):
        hour = rng.randrange(48) * 3600
        total = rng.choice([0, 0, 1, 5, 1000])
        data["principal"].append(rng.choice(principals))
        data["tenant"].append(rng.choice(["acme", "globex", "zeta", None]))
        data["hour"].append(hour)
        data["host"].append(rng.choice(["10.0.0.1", "10.0.0.2", None]))
        data["lines"].append(total + 1)
        data["records"].append(total)
        data["first"].append(hour)
        data["last"].append(hour + 59)
        data["total"].append(total)
        data["allowed"].append(rng.randrange(total + 1))
        data["bytes"].append(rng.choice([0, 17, 3 << 31]))
        data["denied"].append(rng.randrange(total + 1))
    table = pa.table(data)
    cut = rows // 3  # several chunks, as Spark's Arrow batches arrive
    return pa.concat_tables([table.slice(0, cut), table.slice(cut)])


@pytest.mark.parametrize("seed", range(8))
def test_bulk_rows_equal_the_grouped_rows(seed: int) -> None:
    rng = random.Random(seed)
    table = _table(rng, rng.choice([1, 2, 50, 3000]))
    got = rollups.hour_rows(table)
    assert got == _grouped(table)
    assert all(type(value) is int for row in got for value in row[3:])


def test_a_principal_hour_under_two_tenants_takes_the_greater_name() -> None:
    table = _table(random.Random(1), 3000)
    got = rollups.hour_rows(table)
    assert any(row.tenant == "zeta" for row in got)
    assert any(row.bytes > 1 << 32 for row in got)
    assert got == sorted(got, key=lambda row: (row.principal, row.hour))


def test_no_requests_no_rows() -> None:
    table = _table(random.Random(2), 40)
    empty = table.filter(pc.equal(table.column("total"), -1))
    assert rollups.hour_rows(empty) == [] == _grouped(empty)
    idle = table.filter(pc.equal(table.column("total"), 0))
    assert rollups.hour_rows(idle) == []
