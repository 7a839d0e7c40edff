"""The Arrow engine and the Spark engine run the same plans: same tables, readable by each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of

COLS = ["id", "city", "ts", "v"]
BATCHES = [
    ("upsert", [(1, "sf", 1, "a"), (2, "nyc", 1, "b"), (2, "nyc", 0, "older"), (3, "la", 1, "c")]),
    ("upsert", [(1, "sf", 2, "a2"), (4, "sf", 1, "d"), (3, "la", 0, "stale")]),
    ("delete", [(2, "nyc")]),
    ("insert_overwrite", [(5, "la", 1, "e")]),
]


def test_public_names_are_exported() -> None:
    for name in ["Table", "CommitResult", "Instant", "TidemarkError", "InvalidInputError", "ConfigError",
                 "TableNotFoundError", "TableExistsError", "WriteConflictError", "LockTimeoutError", "register"]:
        assert hasattr(tidemark, name), name
        assert name in tidemark.__all__


def _apply(table: tidemark.Table, make: Any) -> list[tidemark.CommitResult]:
    results = []
    for op, rows in BATCHES:
        results.append(getattr(table, op)(make(op, rows)))
    return results


def test_both_engines_produce_the_same_table(spark: Any, tmp_path: Path) -> None:
    def spark_batch(op: str, rows: list[tuple[Any, ...]]) -> Any:
        if op == "delete":
            return spark.createDataFrame([r[:2] for r in rows], "id long, city string")
        return spark.createDataFrame(rows, "id long, city string, ts long, v string")

    def arrow_batch(op: str, rows: list[tuple[Any, ...]]) -> pa.Table:
        names = COLS[:2] if op == "delete" else COLS
        return pa.Table.from_pylist([dict(zip(names, r, strict=False)) for r in rows])

    kwargs = {"record_key": "id", "partition_by": "city", "ordering_field": "ts"}
    with_spark = tidemark.Table.create(str(tmp_path / "spark"), spark=spark, **kwargs)
    with_arrow = tidemark.Table.create(str(tmp_path / "arrow"), spark=None, **kwargs)
    spark_results = _apply(with_spark, spark_batch)
    arrow_results = _apply(with_arrow, arrow_batch)
    counts = [(r.operation, r.num_inserts, r.num_updates, r.num_deletes) for r in spark_results]
    assert counts == [(r.operation, r.num_inserts, r.num_updates, r.num_deletes) for r in arrow_results]

    expected = [(1, "sf", 2, "a2"), (4, "sf", 1, "d"), (5, "la", 1, "e")]
    assert rows_of(with_spark.read(), COLS) == expected
    assert rows_of(with_arrow.read(), COLS) == expected
    # each engine reads the other's table, and hudi-rs reads both
    assert rows_of(tidemark.Table.open(with_spark.path, spark=None).read(), COLS) == expected
    assert rows_of(tidemark.Table.open(with_arrow.path, spark=spark).read(), COLS) == expected
    assert rows_of(hudi_rs_read(with_arrow.path), COLS) == expected
    assert with_arrow.schema == with_spark.schema


def test_arrow_engine_rejects_spark_dataframes_clearly(spark: Any, tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    with pytest.raises(tidemark.InvalidInputError, match="pyarrow"):
        table.upsert(spark.createDataFrame([(1,)], "id long"))


def test_arrow_engine_bad_input_changes_nothing(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="city")
    table.upsert(pa.table({"id": [1], "city": ["sf"], "v": ["a"]}))
    before = sorted(p.name for p in Path(table.path).rglob("*"))
    with pytest.raises(tidemark.NullRecordKeyError):
        table.upsert(pa.table({"id": [None, 2], "city": ["sf", "sf"], "v": ["x", "y"]}))
    with pytest.raises(tidemark.SchemaMismatchError):
        table.upsert(pa.table({"id": [3], "city": ["sf"], "v": [1.5]}))
    with pytest.raises(tidemark.MissingColumnError):
        table.upsert(pa.table({"city": ["sf"], "v": ["x"]}))
    assert sorted(p.name for p in Path(table.path).rglob("*")) == before
    assert table.read().to_pylist()[0]["v"] == "a"
