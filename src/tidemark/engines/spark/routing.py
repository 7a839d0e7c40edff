"""Routing in the Spark engine: each row of a tagged batch gets the file group it is written to.

An existing key keeps the file group the index found; a new key goes to the insert bucket
(a small file to top up, or a new file group) whose hash range holds its key's hash
(:mod:`tidemark.write.plan`). A few buckets are one ``CASE`` expression over the tagged
batch; many are a broadcast table of hash ranges joined with the inserts. With the bucket
index, every row's file group is its key's bucket, computed where the row is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidemark.engines.spark.expressions import HASH_COLUMN, bucket_of, bucket_sql, key_hash, name
from tidemark.format.names import PARTITION_PATH
from tidemark.merge import OP_COLUMN, OP_UPSERT
from tidemark.write.bucket import BucketAssignment
from tidemark.write.engine import FILE_ID_COLUMN
from tidemark.write.plan import InsertBucket

# Up to this many insert buckets, inserts are routed by an expression rather than a join.
ROUTE_BY_EXPRESSION = 64


def route(spark: SparkSession, tagged: DataFrame, buckets: Sequence[InsertBucket] | None) -> DataFrame:
    """The rows to write, with the upsert op: existing keys keep their file group, new keys get
    their bucket's (None: the bucket index gave every row its file group).

    With a few buckets this is one projection of the tagged batch, so the write reads it once;
    with many, the inserts are routed by :func:`route_inserts` and put back.
    """
    if buckets is None:
        return _upserts(tagged)
    if buckets and len(buckets) <= ROUTE_BY_EXPRESSION:
        # The hash is a column of its own so that Spark computes it once, not once per bucket.
        hashed = tagged.withColumn(HASH_COLUMN, key_hash())
        fid, op = name(FILE_ID_COLUMN), name(OP_COLUMN)
        new = {FILE_ID_COLUMN: f"coalesce({fid}, {bucket_sql(buckets)}) AS {fid}",
               OP_COLUMN: f"'{OP_UPSERT}' AS {op}"}
        columns = [new.pop(c, name(c)) for c in tagged.columns]  # in place, as withColumns puts them
        rows = hashed.selectExpr(*columns, *new.values())
        return rows.filter(F.expr(f"{fid} IS NOT NULL"))
    updates = tagged.filter(F.col(FILE_ID_COLUMN).isNotNull())
    if not buckets:
        return _upserts(updates)
    inserts = tagged.filter(F.col(FILE_ID_COLUMN).isNull())
    return _upserts(updates.unionByName(route_inserts(spark, inserts, buckets)))


def route_inserts(spark: SparkSession, inserts: DataFrame, buckets: Sequence[InsertBucket]) -> DataFrame:
    """Each insert's file group: the bucket whose hash range holds its key's hash.

    A few buckets become one ``CASE`` expression (no join, no extra job); many are joined as a
    broadcast table of ranges. A row that no bucket takes is dropped.
    """
    if len(buckets) <= ROUTE_BY_EXPRESSION:
        routed = inserts.withColumn(HASH_COLUMN, key_hash()).withColumn(FILE_ID_COLUMN, bucket_of(buckets))
        return routed.filter(F.col(FILE_ID_COLUMN).isNotNull()).drop(HASH_COLUMN)
    hashed = inserts.drop(FILE_ID_COLUMN).withColumn(HASH_COLUMN, key_hash())
    rows = [(b.partition_path, b.file_id, b.low, b.high) for b in buckets]
    ranges = spark.createDataFrame(rows, "_b_pp string, _b_fid string, _b_low double, _b_high double")
    cond = (
        (hashed[PARTITION_PATH] == ranges["_b_pp"])
        & (hashed[HASH_COLUMN] >= ranges["_b_low"])
        & (hashed[HASH_COLUMN] < ranges["_b_high"])
    )
    joined = hashed.join(F.broadcast(ranges), cond, "inner")
    routed = joined.withColumn(FILE_ID_COLUMN, F.col("_b_fid"))
    return routed.drop(HASH_COLUMN, "_b_pp", "_b_fid", "_b_low", "_b_high")


def _upserts(rows: DataFrame) -> DataFrame:
    return rows.withColumn(OP_COLUMN, F.lit(OP_UPSERT))


def bucket_file_ids(df: DataFrame, assignment: BucketAssignment) -> DataFrame:
    """Every row's file id from its key's bucket, computed in the tasks: no join, no lookup."""
    if FILE_ID_COLUMN in df.columns:
        df = df.drop(FILE_ID_COLUMN)
    out_schema = df.withColumn(FILE_ID_COLUMN, F.lit(None).cast("string")).schema

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            yield from table.append_column(FILE_ID_COLUMN, assignment.file_ids(table, PARTITION_PATH)).to_batches()

    return df.mapInArrow(assign, out_schema)
