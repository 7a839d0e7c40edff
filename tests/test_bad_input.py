"""Bad input: a clear typed error, and the table exactly as it was (read before and after)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import (
    ConfigError,
    InvalidInputError,
    MissingColumnError,
    NullRecordKeyError,
    SchemaMismatchError,
    Table,
    TableExistsError,
    TableNotFoundError,
    UnknownOptionError,
)

SCHEMA = "id int, city string, ts long, v string"
COLS = ["_hoodie_commit_time", "id", "city", "ts", "v"]


def _snapshot_of_disk(path: str) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


@pytest.fixture
def table(spark: Any, tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city", ordering_field="ts")
    t.upsert(spark.createDataFrame([(1, "sf", 1, "a"), (2, "nyc", 1, "b")], SCHEMA))
    return t


BAD_BATCHES = {
    "null key": (
        "id int, city string, ts long, v string",
        [(None, "sf", 1, "x"), (3, "sf", 1, "y")],
        NullRecordKeyError,
    ),
    "missing key column": ("city string, ts long, v string", [("sf", 1, "x")], MissingColumnError),
    "missing partition column": ("id int, ts long, v string", [(3, 1, "x")], MissingColumnError),
    "number for text": (  # schema evolution: no common type (an extra column would be added)
        "id int, city string, ts long, v double",
        [(3, "sf", 1, 1.0)],
        SchemaMismatchError,
    ),
    "wrong type": ("id int, city string, ts string, v string", [(3, "sf", "late", "x")], SchemaMismatchError),
    "missing value column": ("id int, city string, ts long", [(3, "sf", 1)], SchemaMismatchError),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert", "insert_overwrite"])
def test_bad_batch_raises_and_changes_nothing(spark: Any, table: Table, case: str, operation: str) -> None:
    schema, rows, error = BAD_BATCHES[case]
    before_rows = rows_of(table.read(), COLS)
    before_disk = _snapshot_of_disk(table.path)
    with pytest.raises(error):
        getattr(table, operation)(spark.createDataFrame(rows, schema))
    assert rows_of(table.read(), COLS) == before_rows
    assert _snapshot_of_disk(table.path) == before_disk


def test_null_key_error_counts_the_records(spark: Any, table: Table) -> None:
    with pytest.raises(NullRecordKeyError) as info:
        table.upsert(spark.createDataFrame([(None, "sf", 1, "x"), (None, "sf", 2, "y")], SCHEMA))
    assert info.value.count == 2
    assert info.value.fields == ["id"]


@pytest.mark.parametrize("operation", ["upsert", "insert", "insert_overwrite", "delete"])
def test_null_keys_found_with_the_tagged_batch_change_nothing(
    spark: Any, tmp_path: Path, operation: str, monkeypatch: Any
) -> None:
    """A non-partitioned table and a batch whose size Spark's plan knows: the null-key check runs
    with the count of the tagged batch, after the dedup and the index lookup but before anything
    is written. The error still counts every null-key record of the batch as it arrived."""
    import pandas as pd

    from tidemark.engines.spark.batch_checks import BatchChecks

    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts")
    t.upsert(spark.createDataFrame([(1, "sf", 1, "a"), (2, "nyc", 1, "b")], SCHEMA))
    deferred: list[bool] = []
    decide = BatchChecks._can_defer_key_check
    monkeypatch.setattr(
        BatchChecks, "_can_defer_key_check", lambda self, df: deferred.append(decide(self, df)) or deferred[-1]
    )
    before_rows, before_disk = rows_of(t.read(), COLS), _snapshot_of_disk(t.path)
    frame = pd.DataFrame({"id": [None, 3, None, 1], "city": ["sf"] * 4, "ts": [1, 1, 2, 5], "v": ["x", "y", "z", "w"]})
    batch = spark.createDataFrame(frame.astype({"id": "Int32"}), SCHEMA)
    with pytest.raises(NullRecordKeyError) as info:
        getattr(t, operation)(batch.select("id", "city") if operation == "delete" else batch)
    assert deferred == [True]  # the check did wait for the tagged batch
    assert info.value.count == 2  # both, though the dedup keeps one record per (null) key
    assert rows_of(t.read(), COLS) == before_rows
    assert _snapshot_of_disk(t.path) == before_disk


TEXT_KEYED = "id string, city string, ts long, v string"


@pytest.mark.parametrize("case", ["null keys", "a partition value that climbs out", "a new partition"])
def test_checks_left_to_footer_tagging_refuse_bad_batches_and_change_nothing(
    spark: Any, tmp_path: Path, case: str, monkeypatch: Any
) -> None:
    """An upsert of a partitioned table with text keys finds each key's file from the footers of
    every partition, without a job to learn the batch's partitions first: the key and partition
    checks ride on the tagged batch's pass, and still refuse a bad batch before anything is
    written. A batch with a partition the table does not have yet is counted apart, and lands."""
    from tidemark.engines.spark.batch_checks import BatchChecks

    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city", ordering_field="ts")
    t.upsert(spark.createDataFrame([("a", "sf", 1, "a"), ("b", "nyc", 1, "b")], TEXT_KEYED))
    checked_apart: list[bool] = []
    monkeypatch.setattr(BatchChecks, "run_now", lambda self, df, int_key: checked_apart.append(True))
    before_rows, before_disk = rows_of(t.read(), COLS), _snapshot_of_disk(t.path)
    rows = [("a", "sf", 2, "u"), ("c", "nyc", 2, "n")]
    if case == "null keys":
        rows += [(None, "sf", 2, "x"), (None, "nyc", 3, "y")]
    elif case == "a partition value that climbs out":
        rows += [("d", "x/../../outside", 2, "z")]
    else:
        rows += [("d", "la", 2, "z")]
    batch = spark.createDataFrame(rows, TEXT_KEYED)
    if case == "a new partition":
        t.upsert(batch)
        assert rows_of(t.read(), ["id", "city", "v"]) == [("a", "sf", "u"), ("b", "nyc", "b"), ("c", "nyc", "n"),
                                                          ("d", "la", "z")]
        assert sorted(hudi_rs_read(t.path).column("id").to_pylist()) == ["a", "b", "c", "d"]
    else:
        with pytest.raises(NullRecordKeyError if case == "null keys" else InvalidInputError) as info:
            t.upsert(batch)
        if case == "null keys":
            assert info.value.count == 2
        assert rows_of(t.read(), COLS) == before_rows
        assert _snapshot_of_disk(t.path) == before_disk
    assert checked_apart == []  # no job of their own


def test_delete_with_null_key_changes_nothing(spark: Any, table: Table) -> None:
    before = _snapshot_of_disk(table.path)
    with pytest.raises(NullRecordKeyError):
        table.delete(spark.createDataFrame([(None, "sf")], "id int, city string"))
    assert _snapshot_of_disk(table.path) == before


def test_widening_casts_are_accepted(spark: Any, table: Table) -> None:
    table.upsert(spark.createDataFrame([(3, "sf", 1, "c")], "id int, city string, ts int, v string"))
    assert (3, "sf", 1, "c") in rows_of(table.read(), ["id", "city", "ts", "v"])


def test_missing_columns_can_be_filled_with_nulls_when_asked(spark: Any, table: Table) -> None:
    t = Table.open(table.path, spark=spark, options={"hoodie.write.set.null.for.missing.columns": "true"})
    t.upsert(spark.createDataFrame([(3, "sf", 1)], "id int, city string, ts long"))
    assert (3, "sf", 1, None) in rows_of(t.read(), ["id", "city", "ts", "v"])


def test_unknown_option_is_rejected_with_a_suggestion(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(UnknownOptionError) as info:
        Table.create(str(tmp_path / "t"), spark=spark, record_key="id", options={"hoodie.parquet.small.file.limt": "1"})
    assert info.value.suggestion == "hoodie.parquet.small.file.limit"
    assert not (tmp_path / "t").exists()


def test_open_with_unknown_option_is_rejected(spark: Any, table: Table) -> None:
    with pytest.raises(UnknownOptionError):
        Table.open(table.path, spark=spark, options={"hoodie.upsert.parallelism": "2"})


def test_open_a_path_that_is_not_a_table(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path / "nothing-here"), spark=spark)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "data.csv").write_text("a,b\n")
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path / "folder"), spark=spark)


def test_create_refuses_existing_tables_and_non_empty_folders(spark: Any, table: Table, tmp_path: Path) -> None:
    before = _snapshot_of_disk(table.path)
    with pytest.raises(TableExistsError):
        Table.create(table.path, spark=spark, record_key="id")
    assert _snapshot_of_disk(table.path) == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(TableExistsError):
        Table.create(str(tmp_path / "other"), spark=spark, record_key="id")
    assert sorted(os.listdir(tmp_path / "other")) == ["notes.txt"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"record_key": []},
        {"record_key": ""},
        {"record_key": "id", "table_type": "SOMETHING"},
        {"record_key": "id", "partition_by": [""]},
    ],
)
def test_create_rejects_bad_arguments_before_touching_disk(spark: Any, tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        Table.create(str(tmp_path / "t"), spark=spark, **kwargs)
    assert not (tmp_path / "t").exists()


def test_insert_dup_policy_fail(spark: Any, table: Table) -> None:
    t = Table.open(table.path, spark=spark, options={"hoodie.datasource.insert.dup.policy": "fail"})
    before = _snapshot_of_disk(t.path)
    with pytest.raises(InvalidInputError):
        t.insert(spark.createDataFrame([(1, "sf", 5, "dup")], SCHEMA))
    assert _snapshot_of_disk(t.path) == before


def test_insert_dup_policy_drop_keeps_the_stored_record(spark: Any, table: Table) -> None:
    t = Table.open(table.path, spark=spark, options={"hoodie.datasource.insert.dup.policy": "drop"})
    result = t.insert(spark.createDataFrame([(1, "sf", 5, "dup"), (9, "sf", 1, "new")], SCHEMA))
    assert result.num_inserts == 1 and result.num_updates == 0
    got = rows_of(t.read(), ["id", "v"])
    assert got == [(1, "a"), (2, "b"), (9, "new")]
