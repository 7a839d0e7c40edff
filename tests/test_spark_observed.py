"""The counts a Spark upsert observes in its passes agree with the grouped jobs they replace."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read

pytestmark = pytest.mark.spark


def _tagged(spark: Any) -> Any:
    from tidemark.write.engine import FILE_ID_COLUMN

    # New keys in three partitions (one of them with no existing key), existing keys in two
    # file groups of one partition and one of another.
    rows = [(f"k{i}", ["a", "b", "c"][i % 3], None) for i in range(31)]
    rows += [(f"e{i}", "a", "fa-1" if i % 2 else "fa-2") for i in range(10)]
    rows += [(f"x{i}", "b", "fb-1") for i in range(4)]
    ddl = f"_hoodie_record_key string, _hoodie_partition_path string, {FILE_ID_COLUMN} string"
    return spark.createDataFrame(rows, ddl)


def test_the_observed_profile_is_the_grouped_profile(spark: Any) -> None:
    from tidemark.engines.spark.observed import ProfileMetrics, kept_with
    from tidemark.engines.spark.writer import SparkWritePipeline
    from tidemark.write.engine import TableLayout

    tagged = _tagged(spark)
    pipeline = SparkWritePipeline(spark, TableLayout(("id",), ("part",), (), False), pa.schema([]), parallelism=0)
    grouped = pipeline.profile(tagged)
    metrics = ProfileMetrics(["a", "b", "c", "d"])  # a path of the batch with no row at all counts nothing
    kept, counts = kept_with(tagged, metrics.columns(), tagged.columns)
    observed = metrics.profile(counts)
    assert observed == grouped
    assert dict(observed.inserts) == {"a": 11, "b": 10, "c": 10}
    assert observed.existing == 14
    assert observed.updated == {("a", "fa-1"), ("a", "fa-2"), ("b", "fb-1")}
    assert kept.count() == 45  # the kept rows are the tagged rows


def test_a_new_key_outside_the_known_paths_falls_back_to_the_grouped_job(spark: Any) -> None:
    from tidemark.engines.spark.observed import ProfileMetrics, kept_with

    tagged = _tagged(spark)
    metrics = ProfileMetrics(["a", "b"])  # "c" missing: its new keys would be lost
    _, counts = kept_with(tagged, metrics.columns(), tagged.columns)
    assert metrics.profile(counts) is None


def test_a_partitioned_upsert_runs_no_counting_job_and_agrees_with_hudi_rs(spark: Any, tmp_path: Any) -> None:
    """Before the write, only the passes that keep the batch's keys and the tagged batch run
    (and the stages Spark's adaptive execution submits for them): no grouped job that only
    counts (a ``collect`` of the pipeline's)."""
    import tidemark

    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="part",
                                  ordering_field="ts")
    first = [{"id": f"k{i:03d}", "part": f"p{i % 4}", "ts": 1, "v": i} for i in range(200)]
    table.bulk_insert(spark.createDataFrame(pa.Table.from_pylist(first).to_pandas()))
    batch = [{"id": f"k{i:03d}", "part": f"p{i % 4}", "ts": 2, "v": -i} for i in range(150, 260)]
    batch.append({"id": "k155", "part": "p3", "ts": 1, "v": 999})  # an older duplicate: loses the dedup
    df = spark.createDataFrame(pa.Table.from_pylist(batch).to_pandas())
    df.count()
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("observed-upsert", "observed-upsert")
    try:
        result = table.upsert(df)
    finally:
        spark.sparkContext.setJobGroup("none", "none")
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup("observed-upsert")
              for s in tracker.getJobInfo(j).stageIds]
    names = [s.name for s in stages if s is not None]
    assert names, "the upsert's passes ran under the caller's job group"
    assert not [n for n in names if n.startswith("collect at") and "engines/spark/writer.py" in n], names
    assert result.num_inserts == 60 and result.num_updates == 50
    got = hudi_rs_read(table.path)
    rows = {r["id"]: r["v"] for r in got.select(["id", "v"]).to_pylist()}
    assert len(rows) == 260
    assert rows["k155"] == -155 and rows["k100"] == 100 and rows["k259"] == -259
