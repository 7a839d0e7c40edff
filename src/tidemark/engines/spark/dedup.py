"""Deduplicating a Spark batch by record key with the table's record merger."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidemark.engines.spark.expressions import name
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.merge import dedup_records
from tidemark.write.engine import TableLayout

_SEQ = "_tm_seq"


def dedup_by_key(df: DataFrame, layout: TableLayout, user_schema: pa.Schema) -> DataFrame:
    """One record per key, merged with the table's merger.

    Commit-time and event-time ordering keep one whole record (max_by: the greatest
    ordering values, then the last occurrence); other mergers run on the rows of each key,
    shuffled together, in arrival order (:func:`tidemark.merge.dedup_records` in tasks).
    """
    # One partition path for all rows (a non-partitioned table): grouping by the key alone
    # shuffles the batch the way the index join (on the key) needs it, so the join does not
    # shuffle it again; the path is put back after.
    one_path = not layout.partition_fields and PARTITION_PATH in df.columns
    keys = [c for c in (PARTITION_PATH, RECORD_KEY) if c in df.columns and not (one_path and c == PARTITION_PATH)]
    if not layout.merge.max_by_dedup:
        if one_path:
            deduped = _dedup_with_merger(df.drop(PARTITION_PATH), keys, layout, user_schema)
            return deduped.withColumn(PARTITION_PATH, F.lit(""))
        return _dedup_with_merger(df, keys, layout, user_schema)
    value_cols = [c for c in df.columns if c not in keys and c != PARTITION_PATH]
    present = [c for c in layout.ordering_fields if c in df.columns]
    # SQL text: a few py4j calls in all, where Column objects cost a dozen per column (expressions.py).
    order = ", ".join([*map(name, present), _SEQ])
    with_seq = df.selectExpr(*map(name, keys), *map(name, value_cols), f"monotonically_increasing_id() AS {_SEQ}")
    if not value_cols:
        deduped = with_seq.groupBy(*keys).agg(F.expr("0 AS _w"))
    else:
        values = ", ".join(map(name, value_cols))
        deduped = with_seq.groupBy(*keys).agg(F.expr(f"max_by(struct({values}), struct({order})) AS _w"))
    # The columns in the batch's order; a non-partitioned table's one path as a constant.
    out = [f"'' AS {name(c)}" if one_path and c == PARTITION_PATH
           else name(c) if c in keys else f"_w.{name(c)} AS {name(c)}" for c in df.columns]
    return deduped.selectExpr(*out)

def _dedup_with_merger(df: DataFrame, keys: list[str], layout: TableLayout, user_schema: pa.Schema) -> DataFrame:
    merge_config = layout.merge
    columns = df.columns

    def dedup_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        merger = merge_config.merger(user_schema)
        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        table = table.sort_by(_SEQ).drop_columns([_SEQ])
        yield from dedup_records(merger, table, keys=keys).select(columns).to_batches()

    # The id reflects the batch's order; rows of one key meet in one task, merged in that order.
    with_seq = df.withColumn(_SEQ, F.monotonically_increasing_id())
    shuffled = with_seq.repartition(*[F.col(k) for k in keys])
    return shuffled.mapInArrow(dedup_partition, df.schema)
