"""Reads through Spark: time travel, incremental by completion time, pruning, the data source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import InstantNotFoundError, InvalidInputError, Table
from tidemark.timeline import Action, State

SCHEMA = "id int, city string, ts long, v string"
COLS = ["id", "city", "v"]


@pytest.fixture(scope="module")
def history(spark: Any, tmp_path_factory: Any) -> tuple[Table, list[Any]]:
    """A table with three commits; returns it and the CommitResults."""
    path = tmp_path_factory.mktemp("reads") / "t"
    t = Table.create(str(path), spark=spark, record_key="id", partition_by="city", ordering_field="ts")
    results = [
        t.upsert(spark.createDataFrame([(1, "sf", 1, "a"), (2, "nyc", 1, "b")], SCHEMA)),
        t.upsert(spark.createDataFrame([(1, "sf", 2, "a2"), (3, "la", 1, "c")], SCHEMA)),
        t.delete(spark.createDataFrame([(2, "nyc")], "id int, city string")),
    ]
    return t, results


def test_time_travel_to_each_commit(history: tuple[Table, list[Any]]) -> None:
    t, (c1, c2, c3) = history
    assert rows_of(t.read(as_of=c1.instant_time), COLS) == [(1, "sf", "a"), (2, "nyc", "b")]
    assert rows_of(t.read(as_of=c2.instant_time), COLS) == [(1, "sf", "a2"), (2, "nyc", "b"), (3, "la", "c")]
    assert rows_of(t.read(as_of=c3.instant_time), COLS) == [(1, "sf", "a2"), (3, "la", "c")]
    assert rows_of(t.read(), COLS) == rows_of(t.read(as_of=c3.instant_time), COLS)
    before_all = str(int(c1.instant_time) - 1)
    assert t.read(as_of=before_all).count() == 0


def test_incremental_between_completion_times(history: tuple[Table, list[Any]]) -> None:
    t, (c1, c2, c3) = history
    assert rows_of(t.read_incremental(), COLS) == rows_of(t.read(), COLS)
    assert rows_of(t.read_incremental(start=c1.completion_time), COLS) == [(1, "sf", "a2"), (3, "la", "c")]
    assert rows_of(t.read_incremental(start=c1.completion_time, end=c2.completion_time), COLS) == [
        (1, "sf", "a2"),
        (3, "la", "c"),
    ]
    assert t.read_incremental(start=c3.completion_time).count() == 0
    theirs = hudi_rs_read(t.path, start=c1.completion_time, end=c2.completion_time)
    assert rows_of(theirs, COLS) == [(1, "sf", "a2"), (3, "la", "c")]


def test_read_changes_returns_a_checkpoint_that_resumes_exactly(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id")
    first = t.read_changes()
    assert first.rows.count() == 0 and first.checkpoint is None
    t.upsert(spark.createDataFrame([(1, "a")], "id int, v string"))
    second = t.read_changes(start=first.checkpoint)
    assert rows_of(second.rows, ["id", "v"]) == [(1, "a")]
    t.upsert(spark.createDataFrame([(2, "b")], "id int, v string"))
    third = t.read_changes(start=second.checkpoint)
    assert rows_of(third.rows, ["id", "v"]) == [(2, "b")]
    assert t.read_changes(start=third.checkpoint).rows.count() == 0


def test_partition_pruning_filters(history: tuple[Table, list[Any]]) -> None:
    t, _ = history
    assert rows_of(t.read(filters=[("city", "=", "sf")]), COLS) == [(1, "sf", "a2")]
    assert rows_of(t.read(filters=[("city", "in", ["la", "sf"])]), COLS) == [(1, "sf", "a2"), (3, "la", "c")]
    assert rows_of(t.read(filters=[("city", "!=", "sf")]), COLS) == [(3, "la", "c")]
    assert {f.partition_path for f in t.read_plan(filters=[("city", "=", "la")]).files} == {"city=la"}
    with pytest.raises(InvalidInputError):
        t.read(filters=[("v", "=", "x")])


def test_data_source_queries(spark: Any, history: tuple[Table, list[Any]]) -> None:
    t, (c1, c2, _) = history
    reader = spark.read.format("tidemark")
    assert rows_of(reader.load(t.path), COLS) == rows_of(t.read(), COLS)
    assert rows_of(reader.option("as_of", c1.instant_time).load(t.path), COLS) == [(1, "sf", "a"), (2, "nyc", "b")]
    incremental = (
        spark.read.format("tidemark")
        .option("hoodie.datasource.query.type", "incremental")
        .option("hoodie.datasource.read.begin.instanttime", c1.completion_time)
        .option("hoodie.datasource.read.end.instanttime", c2.completion_time)
        .load(t.path)
    )
    assert rows_of(incremental, COLS) == [(1, "sf", "a2"), (3, "la", "c")]
    pruned = spark.read.format("tidemark").load(t.path).filter("city = 'sf'")
    assert rows_of(pruned, COLS) == [(1, "sf", "a2")]
    assert "_hoodie_commit_time" in reader.load(t.path).columns


def test_bad_read_arguments(history: tuple[Table, list[Any]]) -> None:
    t, _ = history
    with pytest.raises(InvalidInputError):
        t.read(as_of="yesterday")
    with pytest.raises(InvalidInputError):
        t.read_incremental(start="2024")


def test_rollback_of_the_latest_commit_restores_the_previous_state(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id")
    first = t.upsert(spark.createDataFrame([(1, "a")], "id int, v string"))
    second = t.upsert(spark.createDataFrame([(1, "b"), (2, "c")], "id int, v string"))
    with pytest.raises(Exception, match="later commits"):
        t.rollback(first.instant_time)
    result = t.rollback(second.instant_time)
    assert result.rolled_back.requested_time == second.instant_time
    assert rows_of(t.read(), ["id", "v"]) == [(1, "a")]
    assert rows_of(hudi_rs_read(t.path), ["id", "v"]) == [(1, "a")]
    completed = [(i.action, i.requested_time) for i in t.timeline() if i.state is State.COMPLETED]
    assert (Action.COMMIT, second.instant_time) not in completed
    assert any(a is Action.ROLLBACK for a, _ in completed)
    with pytest.raises(InstantNotFoundError):
        t.rollback("20000101000000000")
