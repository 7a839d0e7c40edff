"""Writes through Spark: every operation, checked against hudi-rs after each step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.timeline import Action, State

SCHEMA = "id int, city string, ts long, v string"
COLS = ["id", "city", "ts", "v"]


def assert_hudi_rs_agrees(table: Table) -> None:
    """Snapshot, time travel to every commit, and incremental between commits agree with hudi-rs."""
    path = table.path
    assert rows_of(hudi_rs_read(path), COLS) == rows_of(table.read(), COLS)
    data = [i for i in table.timeline() if i.is_completed and i.action.writes_data]
    for inst in data:
        ours = rows_of(table.read(as_of=inst.requested_time), COLS)
        assert rows_of(hudi_rs_read(path, as_of=inst.requested_time), COLS) == ours, inst
    ordered = sorted(data, key=lambda i: i.completion_time)
    for before, after in zip(ordered, ordered[1:], strict=False):
        ours = rows_of(table.read_incremental(start=before.completion_time, end=after.completion_time), COLS)
        theirs = rows_of(hudi_rs_read(path, start=before.completion_time, end=after.completion_time), COLS)
        assert theirs == ours, (before, after)


@pytest.fixture(params=["partitioned", "non_partitioned"])
def table(request: Any, spark: Any, tmp_path: Path) -> Table:
    partition_by = ["city"] if request.param == "partitioned" else []
    return Table.create(
        str(tmp_path / "t"), spark=spark, record_key="id", partition_by=partition_by, ordering_field="ts"
    )


def test_every_operation_and_hudi_rs_agrees(spark: Any, table: Table) -> None:
    first = table.insert(
        spark.createDataFrame([(1, "sf", 1, "a"), (2, "sf", 1, "b"), (3, "nyc", 1, "c"), (4, "la", 1, "d")], SCHEMA)
    )
    assert (first.operation, first.num_inserts, first.num_updates) == ("INSERT", 4, 0)

    second = table.upsert(spark.createDataFrame([(2, "sf", 2, "b2"), (5, "nyc", 1, "e")], SCHEMA))
    assert (second.num_inserts, second.num_updates) == (1, 1)

    deleted = table.delete(spark.createDataFrame([(3, "nyc"), (99, "nyc")], "id int, city string"))
    assert deleted.num_deletes == 1

    bulk = table.bulk_insert(spark.createDataFrame([(6, "la", 1, "f")], SCHEMA))
    assert bulk.operation == "BULK_INSERT"

    overwrite = table.insert_overwrite(spark.createDataFrame([(7, "sf", 1, "g")], SCHEMA))
    assert overwrite.operation == "INSERT_OVERWRITE"

    expected_partitioned = [(4, "la", 1, "d"), (5, "nyc", 1, "e"), (6, "la", 1, "f"), (7, "sf", 1, "g")]
    got = rows_of(table.read(), COLS)
    if table.config.partition_fields:
        assert got == expected_partitioned  # only city=sf was overwritten
    else:
        assert got == [(7, "sf", 1, "g")]  # the whole (single-partition) table was overwritten
    actions = [i.action for i in table.timeline() if i.state is State.COMPLETED]
    assert actions == [Action.COMMIT] * 4 + [Action.REPLACE_COMMIT]
    assert_hudi_rs_agrees(table)


def test_batch_dedup_by_ordering_field_then_last_occurrence(spark: Any, table: Table) -> None:
    table.upsert(
        spark.createDataFrame(
            [(1, "sf", 5, "newest"), (1, "sf", 3, "older"), (2, "sf", 1, "first"), (2, "sf", 1, "last")], SCHEMA
        ).coalesce(1)
    )
    assert rows_of(table.read(), COLS) == [(1, "sf", 5, "newest"), (2, "sf", 1, "last")]


def test_dedup_without_ordering_field_keeps_the_last_occurrence(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id")
    t.upsert(spark.createDataFrame([(1, "a"), (1, "b"), (1, "c")], "id int, v string").coalesce(1))
    assert rows_of(t.read(), ["id", "v"]) == [(1, "c")]


def test_stale_update_does_not_overwrite_a_newer_record(spark: Any, table: Table) -> None:
    table.upsert(spark.createDataFrame([(1, "sf", 10, "new")], SCHEMA))
    result = table.upsert(spark.createDataFrame([(1, "sf", 5, "stale")], SCHEMA))
    assert result.num_updates == 0
    assert rows_of(table.read(), COLS) == [(1, "sf", 10, "new")]


def test_update_rewrites_only_touched_file_groups_and_keeps_commit_times(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city")
    first = t.upsert(
        spark.createDataFrame([(i, c, 1, "v") for i in range(10) for c in ["a", "b"] if i % 2 == (c == "b")], SCHEMA)
    )
    second = t.upsert(spark.createDataFrame([(0, "a", 2, "w")], SCHEMA))
    assert second.partitions == ("city=a",) and second.num_files == 1
    rows = {r["id"]: r["_hoodie_commit_time"] for r in t.read().collect()}
    assert rows[0] == second.instant_time
    assert all(rows[i] == first.instant_time for i in rows if i != 0)
    # the untouched partition's only file is still the first commit's
    files = [f for f in t.read_plan().files if f.partition_path == "city=b"]
    assert [f.instant_time for f in files] == [first.instant_time]


def test_insert_never_creates_a_duplicate_key(spark: Any, table: Table) -> None:
    table.insert(spark.createDataFrame([(1, "sf", 1, "a")], SCHEMA))
    table.insert(spark.createDataFrame([(1, "sf", 2, "b")], SCHEMA))
    assert rows_of(table.read(), COLS) == [(1, "sf", 2, "b")]


def test_file_sizing_inserts_go_to_small_files_then_new_groups(spark: Any, tmp_path: Path) -> None:
    options = {
        "hoodie.parquet.max.file.size": "60000",
        "hoodie.parquet.small.file.limit": "30000",
        "hoodie.copyonwrite.record.size.estimate": "40",
    }
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", options=options)
    first = t.insert(spark.range(100).selectExpr("id", "repeat('x', 20) as v"))
    assert first.num_files == 1
    second = t.insert(spark.range(100, 200).selectExpr("id", "repeat('x', 20) as v"))
    assert second.file_groups == first.file_groups  # the small file took the inserts
    third = t.insert(spark.range(200, 6000).selectExpr("id", "repeat('x', 20) as v"))
    assert third.num_files > 2
    sizes = [f.size for f in t.read_plan().files]
    assert max(sizes) < 2 * 60000
    assert t.read().count() == 6000


def test_bulk_insert_rolls_files_at_the_max_size(spark: Any, tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        spark=spark,
        record_key="id",
        options={"hoodie.parquet.max.file.size": "200000", "hoodie.parquet.small.file.limit": "0"},
    )
    result = t.bulk_insert(spark.range(0, 200_000, numPartitions=2).selectExpr("id", "uuid() as v"))
    assert result.num_files > 2
    assert result.num_inserts == 200_000
    assert t.read().select("id").distinct().count() == 200_000
    for f in t.read_plan().files:
        meta = pq.ParquetFile(t.storage.full_path(f.path)).metadata
        assert meta.num_rows > 0


def test_composite_record_key_and_plain_partition_folders(spark: Any, tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        spark=spark,
        record_key=["a", "b"],
        partition_by=["p", "q"],
        options={"hoodie.datasource.write.hive_style_partitioning": "false"},
    )
    t.upsert(
        spark.createDataFrame(
            [(1, "x", "p1", 7, "v1"), (1, "y", "p1", 7, "v2")], "a int, b string, p string, q int, v string"
        )
    )
    t.upsert(spark.createDataFrame([(1, "x", "p1", 7, "v3")], "a int, b string, p string, q int, v string"))
    rows = sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"], r["v"]) for r in t.read().collect())
    assert rows == [("a:1,b:x", "p1/7", "v3"), ("a:1,b:y", "p1/7", "v2")]
    assert (Path(t.path) / "p1" / "7" / ".hoodie_partition_metadata").exists()
    assert rows_of(hudi_rs_read(t.path), ["a", "b", "v"]) == [(1, "x", "v3"), (1, "y", "v2")]


def test_empty_batch_publishes_an_empty_commit(spark: Any, table: Table) -> None:
    result = table.upsert(spark.createDataFrame([], SCHEMA))
    assert (result.num_inserts, result.num_files) == (0, 0)
    assert table.read().count() == 0
