"""Parquet files of a table on an object store, read by Spark tasks in Python.

The JVM's parquet reader needs a Hadoop file system for the store (hadoop-aws jars and their
credentials); tidemark's tasks instead open the table's storage from its picklable
:class:`~tidemark.storage.location.StorageLocation` and read each file through it, with the same
storage options as the driver. Local tables keep the JVM reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.engines.spark.connect import default_parallelism
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


def read_columns_of(spark: SparkSession, storage: Storage, paths: Sequence[str], schema: pa.Schema) -> DataFrame:
    """The ``schema``'s columns of the parquet files at ``paths`` (relative to the table):
    Spark's own reader on a local table (an explicit schema spares it a job inferring one
    from the footers); on an object store, Python tasks read each file's chunks of those
    columns through the table's storage with ranged reads."""
    if storage.is_local:
        return spark.read.schema(from_arrow_schema(schema)).parquet(*(storage.full_path(p) for p in paths))
    return read_parquet_files(spark, location_of(storage), list(paths), schema, ranged=True)
