"""Merge modes and the bucket index on the Spark engine: the same tables as the Arrow engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.write.bucket import bucket_file_id, bucket_of

SCHEMA = "id long, city string, ts long, a string, b long"
COLS = ["id", "city", "ts", "a", "b"]


def test_partial_update_dedup_and_merge_on_spark_match_the_arrow_engine(spark: Any, tmp_path: Path) -> None:
    options = {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}
    first = [(1, "sf", 1, "a1", 1), (2, "la", 1, "a2", 2)]
    # key 1: the ts=3 record wins and takes "late" from the ts=2 one for its null column a
    second = [(1, "sf", 3, None, 30), (1, "sf", 2, "late", None), (2, "la", 0, "stale", 20)]
    tables = {}
    for engine in ("spark", "arrow"):
        table = Table.create(
            str(tmp_path / engine),
            spark=spark if engine == "spark" else None,
            record_key="id",
            partition_by="city",
            ordering_field="ts",
            options=options,
        )
        for rows in (first, second):
            if engine == "spark":
                table.upsert(spark.createDataFrame(rows, SCHEMA))
            else:
                table.upsert(pa.Table.from_pylist([dict(zip(COLS, r, strict=True)) for r in rows]))
        tables[engine] = rows_of(table.read(), COLS)
    assert tables["spark"] == tables["arrow"] == [(1, "sf", 3, "late", 30), (2, "la", 1, "a2", 2)]
    assert rows_of(hudi_rs_read(str(tmp_path / "spark")), COLS) == tables["spark"]


def test_stale_delete_keeps_the_newer_record_on_spark(spark: Any, tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city", ordering_field="ts")
    table.upsert(spark.createDataFrame([(1, "sf", 5, "x", 1), (2, "sf", 5, "y", 2)], SCHEMA))
    result = table.delete(spark.createDataFrame([(1, "sf", 4), (2, "sf", 6)], "id long, city string, ts long"))
    assert result.num_deletes == 1
    assert rows_of(table.read(), ["id"]) == [(1,)]


def test_bucket_index_on_spark_places_keys_like_the_arrow_engine(spark: Any, tmp_path: Path) -> None:
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "3"}
    table = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city", options=options)
    rows = [(i, "sf" if i % 2 else "la", 1, "v", i) for i in range(12)]
    table.upsert(spark.createDataFrame(rows, SCHEMA))
    table.upsert(spark.createDataFrame([(3, "sf", 2, "w", 3)], SCHEMA))
    placed = {r["id"]: r["_hoodie_file_name"].split("_")[0] for r in table.read().collect()}
    assert placed == {i: bucket_file_id(bucket_of([str(i)], 3)) for i in range(12)}
    assert len(hudi_rs_read(str(tmp_path / "t"))) == 12
