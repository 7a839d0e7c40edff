"""Deduplicating a Spark batch by record key with the table's record merger.

Two places do it: a Spark stage before the index (:func:`dedup_by_key`), or, where every row
of a key is sure to reach one file group's write, the write task itself
(:func:`with_arrival_order` numbers the rows; :func:`dedup_in_arrival_order` merges a file
group's repeated keys in that order). The second spares the batch a shuffle of its full rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidemark.engines.spark.expressions import name
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.merge import MergeConfig, dedup_records, greatest_per_key
from tidemark.write.engine import TableLayout
from tidemark.write.operation import WriteOperation

_SEQ = "_tm_seq"
SEQ_COLUMN = _SEQ  # a row's place in the batch, while the write tasks still have to dedup it


def batch_dedup(df: DataFrame, layout: TableLayout, user_schema: pa.Schema, operation: WriteOperation) -> DataFrame:
    """One record per key (:func:`dedup_by_key`); or, where the write tasks can do it, the batch
    numbered in arrival order (:func:`with_arrival_order`), left to them.

    The tasks can for an upsert with the simple index: every row of a key lands in one file
    group (an existing key: the one the index join finds for it; a new key: the insert bucket
    its hash falls in), and that group's task merges them before it writes
    (:func:`dedup_in_arrival_order`). The workload profile then counts a repeated new key once
    per row: only file sizing reads that, as an estimate; the write statistics come from the
    tasks, after the dedup.
    """
    if operation is WriteOperation.UPSERT and layout.bucket is None:
        return with_arrival_order(df)
    return dedup_by_key(df, layout, user_schema)


def with_arrival_order(df: DataFrame) -> DataFrame:
    """``df`` with each row's place in the batch in :data:`SEQ_COLUMN` (increasing in arrival
    order, not contiguous). The caller keeps the frame computed once (a local checkpoint): the
    id depends on how the source's rows fall into partitions, so it must be read once."""
    return df.selectExpr("*", f"monotonically_increasing_id() AS {_SEQ}")


def dedup_in_arrival_order(
    rows: pa.Table, merge: MergeConfig, ordering_fields: Sequence[str], schema: pa.Schema
) -> pa.Table:
    """One file group's rows (:func:`with_arrival_order` numbered them) with one record per key,
    as :func:`dedup_by_key` keeps it, :data:`SEQ_COLUMN` dropped.

    Commit-time and event-time ordering keep the row with the greatest ``ordering_fields`` (the
    table's; a null below every value), then the latest arrival: one sort of the keys, however
    often a key repeats. Other mergers (``merge.merger(schema)``) fold each key's rows in arrival
    order (:func:`tidemark.merge.dedup_records`). All rows hold one partition path, so the record
    key alone is the key. When no key repeats (the common case) this is one hash pass over the
    keys (their unique values) and the rows come back as they are.
    """
    seq = rows.column(_SEQ)
    rows = rows.drop_columns([_SEQ])
    # unique, not count_distinct: the same answer in about a third of the time
    if rows.num_rows <= 1 or len(pc.unique(rows.column(RECORD_KEY))) == rows.num_rows:
        return rows
    if merge.max_by_dedup:
        ordering = [c for c in ordering_fields if c in rows.column_names]
        return rows.take(greatest_per_key([rows.column(RECORD_KEY)], [rows.column(c) for c in ordering], seq))
    return dedup_records(merge.merger(schema), rows.take(pc.sort_indices(seq)), keys=[RECORD_KEY])


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
