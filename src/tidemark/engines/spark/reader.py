"""Spark reads of a read plan: the JVM's parquet reader over the planned base files; file
slices with log files (merge-on-read) are merged in Python tasks, one slice per task at
most, by :func:`tidemark.read.merge.read_slice` (the same merge as the Arrow engine)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.engines.spark.connect import default_parallelism
from tidemark.engines.spark.object_files import read_local_parquet, read_parquet_files
from tidemark.format.names import COMMIT_TIME
from tidemark.format.schema import with_meta_columns
from tidemark.merge import RecordMerger
from tidemark.read.merge import read_slice
from tidemark.read.plan import ReadPlan
from tidemark.storage import Storage
from tidemark.storage.base import DataSource
from tidemark.storage.location import StorageLocation, location_of, storage_of
from tidemark.timeline import Timeline
from tidemark.timeline.table_schema import promoted_from_long

_LOG_SEPARATOR = "\n"


def _merged_slices(
    spark: SparkSession,
    slices: list[tuple[str, str]],
    arrow_schema: pa.Schema,
    merger: RecordMerger | None,  # None: no slice has log files
    delete_ordering_field: str | None,
    location: StorageLocation | None = None,
) -> DataFrame:
    # The closure ships the merger (built on the driver) to the tasks. With a location (an object
    # store) the paths are table-relative and the tasks read them through the table's storage.
    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_of(location) if location is not None else None
        for batch in batches:
            for base, logs in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                names = [p for p in logs.split(_LOG_SEPARATOR) if p]
                sources: list[DataSource] = (
                    [storage.open_input(n) for n in names] if storage is not None else list(names))
                table = read_slice(
                    storage.open_input(base) if storage is not None else base, sources, cast(RecordMerger, merger),
                    arrow_schema,
                    delete_ordering_field=delete_ordering_field,
                    base_path=base if storage is not None else None,
                )
                yield from table.to_batches()

    descriptors = spark.createDataFrame(slices, "base string, logs string")
    descriptors = descriptors.repartition(min(len(slices), default_parallelism(spark) * 4))
    return descriptors.mapInArrow(merge, from_arrow_schema(arrow_schema))


def arrow_to_spark(spark: SparkSession, rows: pa.Table) -> DataFrame:
    """A small Arrow table (computed on the driver) as a DataFrame with the same schema."""
    schema = from_arrow_schema(rows.schema)
    if rows.num_rows == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(rows, schema)


def read_plan(
    spark: SparkSession,
    storage: Storage,
    plan: ReadPlan,
    user_schema: pa.Schema | None,
    *,
    merger: RecordMerger | None = None,
    delete_ordering_field: str | None = None,
) -> DataFrame:
    """A DataFrame of the plan's rows: the five meta columns, then the user columns.

    ``merger`` (the table's) folds file slices with log files; required when the plan has any.
    """
    arrow_schema = with_meta_columns(user_schema or pa.schema([]))
    schema = from_arrow_schema(arrow_schema)
    if not plan.files:
        return spark.createDataFrame([], schema)
    # Object stores: table-relative paths, read by tasks through the storage (no Hadoop connector).
    name = storage.full_path if storage.is_local else (lambda p: p)
    location = None if storage.is_local else location_of(storage)
    plain = [name(f.path) for f in plan.files if not plan.logs_of(f)]
    slices = [
        (name(f.path), _LOG_SEPARATOR.join(name(g.path) for g in plan.logs_of(f)))
        for f in plan.files
        if plan.logs_of(f)
    ]
    if plain and promoted_from_long(Timeline.load(storage), user_schema or pa.schema([])):
        # Spark's parquet reader cannot read a long column as a double (schema evolution
        # promoted one): the base files are read by Arrow tasks, which cast.
        slices += [(path, "") for path in plain]
        plain = []
    parts = []
    if plain and location is not None:
        parts.append(read_parquet_files(spark, location, plain, arrow_schema))
    elif plain:
        parts.append(read_local_parquet(spark, plain, schema))
    if slices:
        if merger is None and any(logs for _, logs in slices):
            raise ValueError("the read plan merges log files: pass the table's record merger")
        parts.append(_merged_slices(spark, slices, arrow_schema, merger, delete_ordering_field, location))
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    if plan.commit_times is not None:
        df = df.filter(F.col(COMMIT_TIME).isin(sorted(plan.commit_times)))
    return df
