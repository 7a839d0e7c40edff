"""bulk_insert on Spark: no index, no shuffle; each task writes its rows into new file groups."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from tidemark.engines.arrow.keys import text_matches_spark, with_key_columns
from tidemark.engines.spark.stats import STATS_DDL, task_stats_table, task_token
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.write.engine import TableLayout
from tidemark.write.file_group import WriteSpec, write_new_files


def _keys_in_tasks(layout: TableLayout, user_schema: pa.Schema) -> bool:
    """Whether the tasks can compute the key and partition path themselves (with Arrow)."""
    fields = (*layout.record_key_fields, *layout.partition_fields)
    return all(text_matches_spark(user_schema.field(name).type) for name in fields)


def write_bulk(
    df: DataFrame,
    spec: WriteSpec,
    layout: TableLayout,
    user_schema: pa.Schema,
    parallelism: int,
    run_job: Callable[[DataFrame], list[WriteStat]],
) -> list[WriteStat]:
    """Write ``df`` into new file groups, each task its own rows (``mapInArrow``); ``run_job``
    collects the tasks' stats. ``parallelism`` (0: as the batch is) repartitions first."""
    # Computing the two key columns in the task costs a fraction of handing them over from
    # the JVM, which is about a fifth of a bulk_insert's time (benchmarks/profile_bulk.py).
    keys_in_tasks = _keys_in_tasks(layout, user_schema)
    if keys_in_tasks:
        df = df.drop(RECORD_KEY, PARTITION_PATH)

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        token, task_partition = task_token()
        if keys_in_tasks:
            batches = (
                with_key_columns(
                    b, layout.record_key_fields, layout.partition_fields,
                    hive_style=layout.hive_style, url_encode=layout.url_encode,
                )
                for b in batches
            )
        stats = list(write_new_files(spec, batches, token=token, task_partition=task_partition))
        if stats:
            yield from task_stats_table(spec, stats).to_batches()

    if parallelism:
        df = df.repartition(parallelism)
    out = df.mapInArrow(write_partition, STATS_DDL)
    return run_job(out)
