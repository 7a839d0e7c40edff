"""The write job of a simple-index write: every (partition, file group) of the rows in a task.

The driver lays up to :data:`BALANCE_GROUPS` file groups out over the tasks by their expected
cost (:mod:`tidemark.engines.spark.tasks`); beyond, Spark hashes them onto the tasks. Each
group's rows meet in one ``applyInArrow`` call that merges them with its base file
(:func:`tidemark.write.file_group.write_file_group`) and returns its write statistics. Rows
that still carry their arrival order (an upsert whose batch dedup was left to the tasks) are
deduplicated there first (:func:`tidemark.engines.spark.dedup.dedup_in_arrival_order`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from tidemark.engines.spark.connect import default_parallelism
from tidemark.engines.spark.dedup import SEQ_COLUMN, dedup_in_arrival_order
from tidemark.engines.spark.expressions import case_when, sql_text
from tidemark.engines.spark.stats import STATS_DDL, task_stats_table, task_token
from tidemark.engines.spark.tasks import balance, partition_keys
from tidemark.format.names import PARTITION_PATH
from tidemark.write.engine import FILE_ID_COLUMN
from tidemark.write.file_group import WriteSpec, write_file_group

_TASK = "_tm_task"

# Up to this many file groups, the driver lays a write's file groups out over the tasks (the
# rows find their task by an expression, so its size grows with the groups); beyond, hashing
# spreads many groups evenly enough.
BALANCE_GROUPS = 64


def file_group_writes(
    spark: SparkSession,
    spec: WriteSpec,
    rows: DataFrame,
    base_files: Mapping[tuple[str, str], str],
    weights: Mapping[tuple[str, str], int] | None,
    parallelism: int,
) -> DataFrame:
    """The (lazy) job that writes every file group of ``rows``: one stats row per group.

    ``weights``: the file groups the write touches, each with its estimated cost (see
    ``SparkWritePipeline.write_file_groups``); ``parallelism`` 0 lets the groups decide.
    """
    base_files = dict(base_files)  # shipped to the tasks with the function

    def write_group(table: pa.Table) -> pa.Table:
        if _TASK in table.column_names:
            table = table.drop_columns([_TASK])
        if SEQ_COLUMN in table.column_names:  # every row of a key is here: dedup before the merge
            table = dedup_in_arrival_order(table, spec.merge, spec.ordering_fields, spec.schema)
        token, task_partition = task_token()
        partition = table.column(PARTITION_PATH)[0].as_py()
        file_id = table.column(FILE_ID_COLUMN)[0].as_py()
        stat = write_file_group(
            spec,
            table,
            partition_path=partition,
            file_id=file_id,
            base_file=base_files.get((partition, file_id)),
            token=token,
            task_partition=task_partition,
        )
        return task_stats_table(spec, [stat])

    # One task per file group up to a few per core: a task's cost is rewriting whole base files,
    # which Spark's adaptive sizing (by shuffled batch bytes) cannot see.
    default = default_parallelism(spark)
    if weights and len(weights) <= BALANCE_GROUPS:
        tasks = parallelism or min(len(weights), 4 * default)
        placed = balance(weights, tasks)
        keys = partition_keys(max(placed.values()) + 1)
        # Null for a group the driver did not expect: hashed onto a task, still whole.
        task = case_when(
            [(f"`{FILE_ID_COLUMN}` = {sql_text(file_id)} AND `{PARTITION_PATH}` = {sql_text(partition)}",
              str(keys[number])) for (partition, file_id), number in placed.items()],
            "int",
        )
        rows = rows.withColumn(_TASK, task).repartition(len(keys), _TASK)
        # Grouping by the task column too lets the groups use the task partitioning as it is.
        grouped = rows.groupBy(_TASK, PARTITION_PATH, FILE_ID_COLUMN)
    else:
        tasks = parallelism or max(default, min(len(base_files), 4 * default))
        grouped = rows.repartition(tasks, PARTITION_PATH, FILE_ID_COLUMN).groupBy(PARTITION_PATH, FILE_ID_COLUMN)
    return grouped.applyInArrow(write_group, STATS_DDL)
