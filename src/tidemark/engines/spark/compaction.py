"""Compaction on Spark: one task per planned file slice.

The driver ships each slice's operation (as Avro JSON) and the table's record merger to
the tasks; each task merges its slice's logs into a new base file
(:func:`tidemark.services.compaction.compact_slice`) and returns its write statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import SparkSession

from tidemark.engines.spark.connect import JobHandle, default_parallelism
from tidemark.engines.spark.stats import STATS_DDL, run_stats_job, stats_table
from tidemark.format.commit_metadata import WriteStat
from tidemark.merge import RecordMerger
from tidemark.services.compaction import CompactionOperation, compact_slice
from tidemark.write.file_group import WriteSpec


def compact_slices(
    spark: SparkSession, spec: WriteSpec, merger: RecordMerger, operations: Sequence[CompactionOperation]
) -> list[WriteStat]:
    """Compaction: one Spark task per planned file slice (services.compaction.compact_slice);
    ``merger`` (the table's, built on the driver) is shipped to the tasks."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for task, op in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                operation = CompactionOperation.from_avro(json.loads(op))
                stat = compact_slice(spec, spec.storage(), operation, task, merger)
                yield from stats_table([stat]).to_batches()

    rows = [(i, json.dumps(op.to_avro())) for i, op in enumerate(operations)]
    tasks = min(len(rows), default_parallelism(spark) * 4) or 1
    ops = spark.createDataFrame(rows, "task int, op string").repartition(tasks)
    compacted = {op.file_id: len(op.log_files) for op in operations}
    job = JobHandle(spark, f"tidemark-write-{spec.instant_time}", f"tidemark write {spec.instant_time}")
    stats = run_stats_job(ops.mapInArrow(run, STATS_DDL), job)
    return [replace(s, log_files_compacted=compacted.get(s.file_id, 0)) for s in stats]
