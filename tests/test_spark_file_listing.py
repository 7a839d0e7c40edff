"""Spark's reader over a table's many base files lists them on the driver, not in a job.

Classic Spark lists more than 32 paths with a job of one task per path (about a second for the
200 base files of a 100-partition table); tidemark's reads of a table's files and the index's
key reads raise that threshold for the one call that resolves the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import tidemark
from conftest import hudi_rs_read, rows_of
from tidemark.engines.spark.object_files import read_local_parquet

THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def _files(tmp_path: Path, count: int) -> list[str]:
    paths = []
    for i in range(count):
        path = tmp_path / f"p{i}" / "f.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.table({"k": pa.array([i * 10 + j for j in range(10)], pa.int64())}), path)
        paths.append(str(path))
    return paths


def _jobs_of(spark: Any, group: str, action: Any) -> tuple[Any, list[int]]:
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return result, list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_many_files_are_listed_by_the_driver_and_the_setting_is_restored(spark: Any, tmp_path: Path) -> None:
    paths = _files(tmp_path, 40)
    # Spark's own reader runs a listing job for 40 paths: what the helper spares.
    _, plain_jobs = _jobs_of(spark, "plain-listing", lambda: spark.read.schema("k long").parquet(*paths))
    assert plain_jobs, "Spark listed 40 paths without a job: the threshold no longer matters"
    assert spark.conf.get(THRESHOLD, None) is None
    frame, jobs = _jobs_of(spark, "tidemark-listing", lambda: read_local_parquet(spark, paths, "k long"))
    assert jobs == []
    assert spark.conf.get(THRESHOLD, None) is None  # unset again, as it was
    assert sorted(r[0] for r in frame.collect()) == list(range(400))
    spark.conf.set(THRESHOLD, "8")  # a user's own setting comes back as it was
    try:
        frame = read_local_parquet(spark, paths, "k long")
        assert spark.conf.get(THRESHOLD) == "8"
        assert frame.count() == 400
    finally:
        spark.conf.unset(THRESHOLD)


def test_a_spark_upsert_and_read_of_a_table_with_many_files(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="ts")
    rows = [(f"k{i:05d}", f"p{i % 50}", 0, i) for i in range(2000)]
    table.bulk_insert(spark.createDataFrame(rows, "id string, part string, ts long, v long"))
    assert len(table.read_plan().files) >= 50
    batch = [(f"k{i:05d}", f"p{i % 50}", 1, -i) for i in range(0, 2600, 3)]
    table.upsert(spark.createDataFrame(batch, "id string, part string, ts long, v long"))
    model = {k: (p, t, v) for k, p, t, v in rows}
    model.update({k: (p, t, v) for k, p, t, v in batch})
    expected = sorted((k, *rest) for k, rest in model.items())
    got = table.read().select("id", "part", "ts", "v").collect()
    assert sorted(tuple(r) for r in got) == expected
    assert rows_of(hudi_rs_read(path), ["id", "part", "ts", "v"]) == expected
    assert spark.conf.get(THRESHOLD, None) is None
    table.close()
