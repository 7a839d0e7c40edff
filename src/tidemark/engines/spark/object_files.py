"""Parquet files of a table on an object store, read by Spark tasks in Python.

The JVM's parquet reader needs a Hadoop file system for the store (hadoop-aws jars and their
credentials); tidemark's tasks instead open the table's storage from its picklable
:class:`~tidemark.storage.location.StorageLocation` and read each file through it, with the same
storage options as the driver. Local tables keep the JVM reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.engines.spark.connect import default_parallelism, is_connect
from tidemark.format.parquet_file import read_data_file
from tidemark.storage import Storage
from tidemark.storage.location import StorageLocation, location_of, storage_of


def read_parquet_files(
    spark: SparkSession, location: StorageLocation, paths: Sequence[str], schema: pa.Schema, *,
    ranged: bool = False,
) -> DataFrame:
    """A DataFrame of the rows of ``paths`` (relative to the table), only ``schema``'s columns.

    ``ranged`` reads only those columns' chunks (ranged GETs, for a few columns of wide files: the
    index's keys) instead of downloading each file in one request (for most of its columns)."""
    columns = list(schema.names)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_of(location)
        for batch in batches:
            for path in batch.column(0).to_pylist():
                source = storage.open_ranged(path) if ranged else storage.open_input(path)
                rows = read_data_file(source, path=path, columns=columns)
                yield from rows.select(columns).cast(schema).to_batches()

    names = spark.createDataFrame([(p,) for p in paths], "path string")
    names = names.repartition(max(1, min(len(paths), default_parallelism(spark) * 4)))
    return names.mapInArrow(read, from_arrow_schema(schema))


# Spark lists more than its threshold of paths (32) with a job of one task per path: ~1 s for the
# 200 base files of a 100-partition table, where the driver stats them in ~0.1 s. Up to this many
# files the driver lists them itself (the paths are files the table's view has just listed).
DRIVER_LISTED_FILES = 2_000
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def read_local_parquet(spark: SparkSession, full_paths: Sequence[str], schema: Any) -> DataFrame:
    """Spark's parquet reader over ``full_paths`` (files, not folders) with ``schema`` (a Spark
    StructType: no job inferring one from the footers), the files listed by the driver.

    Classic Spark resolves the files when the reader is called, so the listing threshold is
    raised for that call only; Spark Connect resolves them later, on the server, and keeps its
    own setting.
    """
    reader = spark.read.schema(schema)
    threshold = spark.conf.get(_LISTING_THRESHOLD) if not is_connect(spark) else None
    if threshold is None or len(full_paths) <= int(threshold) or len(full_paths) > DRIVER_LISTED_FILES:
        return reader.parquet(*full_paths)
    was_set = spark.conf.get(_LISTING_THRESHOLD, None)
    spark.conf.set(_LISTING_THRESHOLD, str(len(full_paths)))
    try:
        return reader.parquet(*full_paths)
    finally:
        if was_set is None:
            spark.conf.unset(_LISTING_THRESHOLD)
        else:
            spark.conf.set(_LISTING_THRESHOLD, was_set)


def read_columns_of(spark: SparkSession, storage: Storage, paths: Sequence[str], schema: pa.Schema) -> DataFrame:
    """The ``schema``'s columns of the parquet files at ``paths`` (relative to the table):
    Spark's own reader on a local table (an explicit schema spares it a job inferring one
    from the footers); on an object store, Python tasks read each file's chunks of those
    columns through the table's storage with ranged reads."""
    if storage.is_local:
        return read_local_parquet(spark, [storage.full_path(p) for p in paths], from_arrow_schema(schema))
    return read_parquet_files(spark, location_of(storage), list(paths), schema, ranged=True)
